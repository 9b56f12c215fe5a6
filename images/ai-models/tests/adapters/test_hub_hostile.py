"""The Hub adapters against a hostile endpoint: what they refuse to follow, read or repeat."""

from __future__ import annotations

import ipaddress
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_models.adapters.hub import (
    EndpointPolicy,
    HubClient,
    HubQuery,
    HubRepository,
    ProviderEndpointRefused,
    ProviderErrorReason,
    ProviderInvalidResponse,
    ProviderRequestRejected,
    ProviderUnavailable,
    client,
    http,
    repository,
)
from ai_models.catalog.source import MAX_LISTING_QUERIES
from fakes.hostile_hub import MIB, HostileHub

SECRET = "hf_FAKESECRETdoNotReflect0123456789"


@pytest.fixture
def hostile() -> Iterator[HostileHub]:
    with HostileHub() as hub:
        yield hub


@pytest.fixture
def sink() -> Iterator[HostileHub]:
    """Where a redirect points: anything it receives was followed."""
    with HostileHub() as hub:
        yield hub


def client_of(hub: HostileHub, **options: object) -> HubClient:
    return HubClient(endpoint=hub.url, token=None, retry_wait=0, **options)  # type: ignore[arg-type]


def test_an_error_body_and_message_header_are_never_repeated_only_the_status_and_a_plain_code(
    hostile: HostileHub,
) -> None:
    hostile.reject_with(
        400,
        body=f'{{"error": "bad filter; your token {SECRET} was logged"}}'.encode(),
        headers={"X-Error-Message": f"token {SECRET}", "X-Error-Code": "BadRequest"},
    )

    with client_of(hostile) as client, pytest.raises(ProviderRequestRejected) as raised:
        client.list_page(HubQuery(), None)

    assert SECRET not in raised.value.message
    assert "HTTP 400" in raised.value.message
    assert "provider code BadRequest" in raised.value.message


@pytest.mark.parametrize("code", [f"Bad {SECRET}", "X" * 41, "1Bad", "Bad-Code", "Ünicode"])
def test_an_error_code_that_is_not_a_plain_identifier_is_left_out(hostile: HostileHub, code: str) -> None:
    hostile.reject_with(400, body=b"{}", headers={"X-Error-Code": code})

    with client_of(hostile) as client, pytest.raises(ProviderRequestRejected) as raised:
        client.list_page(HubQuery(), None)

    assert code not in raised.value.message
    assert "provider code" not in raised.value.message


def test_a_redirect_to_another_port_on_the_same_host_is_not_followed(
    hostile: HostileHub, sink: HostileHub
) -> None:
    # The controller's own metrics port is such a place: 127.0.0.1, another port.
    hostile.redirect_to(f"{sink.url}/metrics")

    with client_of(hostile) as client, pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    assert sink.count() == 0
    assert "redirected to another host" in raised.value.message
    assert str(sink.port) not in raised.value.message


def test_a_redirect_to_a_malformed_url_is_refused_as_an_invalid_answer(hostile: HostileHub) -> None:
    hostile.redirect_to("http://[::1/x")

    with client_of(hostile) as client, pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    assert "malformed URL" in raised.value.message


def test_a_body_that_does_not_decode_is_an_unavailable_endpoint(hostile: HostileHub) -> None:
    hostile.serve(b"not gzip at all", headers={"Content-Encoding": "gzip"})

    with client_of(hostile) as client, pytest.raises(ProviderUnavailable) as raised:
        client.list_page(HubQuery(), None)

    assert "DecodingError" in raised.value.message


def test_redirects_on_the_same_origin_are_followed_a_bounded_number_of_times(hostile: HostileHub) -> None:
    hostile.redirect_to("/api/models?again=1")

    with client_of(hostile) as client, pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    assert "more than 5 times" in raised.value.message
    assert hostile.count() == 6


def test_a_body_that_stalls_midway_is_given_up_after_the_read_timeout(hostile: HostileHub) -> None:
    hostile.stall_after(1024, announced=MIB)

    with (
        client_of(hostile, timeout=0.5, max_retries=0) as client,
        pytest.raises(ProviderUnavailable) as raised,
    ):
        client.list_page(HubQuery(), None)

    assert raised.value.reason is ProviderErrorReason.UNAVAILABLE


def test_a_body_that_trickles_is_given_up_at_its_deadline(hostile: HostileHub) -> None:
    hostile.trickle(every=0.02)

    with (
        client_of(hostile, timeout=5.0, max_retries=0, listing_deadline=0.3) as client,
        pytest.raises(ProviderUnavailable) as raised,
    ):
        client.list_page(HubQuery(), None)

    assert "too slow" in raised.value.message


def test_a_huge_listing_is_cut_off_at_the_cap_with_memory_bounded_by_the_cap(hostile: HostileHub) -> None:
    hostile.huge_listing(300 * MIB)

    tracemalloc.start()
    try:
        with client_of(hostile) as client, pytest.raises(ProviderInvalidResponse) as raised:
            client.list_page(HubQuery(), None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert "too large" in raised.value.message
    # The 16 MiB cap plus the buffer's growth, not 300 MiB and its parse.
    assert peak < 48 * MIB


def test_a_listing_that_announces_more_than_the_cap_is_not_read_at_all(hostile: HostileHub) -> None:
    hostile.huge_listing(300 * MIB, announce=True)

    with client_of(hostile) as client, pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    assert "announced" in raised.value.message


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://169.254.169.254",
        "http://169.254.170.2",
        "http://[fd00:ec2::254]",
        "http://metadata.google.internal",
        "http://METADATA.google.internal.",
        "http://[::ffff:169.254.169.254]",
        "http://169.254.10.10:8080",
        "http://[fe80::1]:8080",
    ],
)
def test_metadata_and_link_local_endpoints_are_refused_without_a_connection(endpoint: str) -> None:
    with (
        HubClient(endpoint=endpoint, token=None, retry_wait=0) as client,
        pytest.raises(ProviderEndpointRefused) as raised,
    ):
        client.list_page(HubQuery(), None)
    assert raised.value.reason is ProviderErrorReason.ENDPOINT_REFUSED
    assert "sources.huggingFace.endpoint" in raised.value.message


def test_the_admin_setting_allows_link_local_mirrors_but_never_metadata_addresses() -> None:
    allowed = EndpointPolicy(allow_link_local=True)
    assert allowed.url_problem("http://169.254.10.10:8080/api/models") is None
    assert allowed.url_problem("http://[fe80::1]/") is None
    for metadata in (
        "http://169.254.169.254/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/",
    ):
        assert allowed.url_problem(metadata) is not None
    assert EndpointPolicy().url_problem("http://169.254.10.10:8080/") is not None


def test_the_address_a_name_resolves_to_is_checked_at_connect_time(hostile: HostileHub) -> None:
    # "localhost" is no address to refuse as written; what it resolves to (127.0.0.1) is, for this
    # policy. A name that resolves to 169.254.169.254 is refused the same way.
    policy = EndpointPolicy(refused_networks=(ipaddress.ip_network("127.0.0.0/8"),))
    client = HubClient(endpoint=f"http://localhost:{hostile.port}", token=None, retry_wait=0, policy=policy)

    with client, pytest.raises(ProviderEndpointRefused) as raised:
        client.list_page(HubQuery(), None)

    assert "resolved to an address" in raised.value.message
    assert hostile.count() == 0  # connected, refused before a byte of the request was sent


def test_a_download_redirected_to_a_metadata_address_is_refused(hostile: HostileHub) -> None:
    hostile.redirect_to("http://169.254.169.254/latest/meta-data/iam/security-credentials/")
    hub = HubRepository(endpoint=hostile.url, token="hf_token", retry_wait=0)

    with pytest.raises(ProviderEndpointRefused), hub.open_file("acme/model", "0" * 40, "model.safetensors"):
        pass


def test_a_download_longer_than_the_listed_size_is_cut_off(hostile: HostileHub) -> None:
    hostile.serve(b"x" * 10_000)
    hub = HubRepository(endpoint=hostile.url, token=None, retry_wait=0)

    def download() -> None:
        with hub.open_file("acme/model", "0" * 40, "model.safetensors", size=100) as remote:
            while remote.read(4096):
                pass

    with pytest.raises(ProviderInvalidResponse) as raised:
        download()

    assert "more of model.safetensors" in raised.value.message


def test_a_model_description_redirected_to_another_host_is_not_followed(
    hostile: HostileHub, sink: HostileHub
) -> None:
    hostile.redirect_to(f"{sink.url}/api/models/acme/model/revision/main")
    hub = HubRepository(endpoint=hostile.url, token=None, retry_wait=0)

    with pytest.raises(ProviderInvalidResponse):
        hub.repository_snapshot("acme/model", "main")

    assert sink.count() == 0


@pytest.mark.parametrize("revision", ["..", ".", "a/../b", "%2e%2e"])
def test_the_repository_adapter_never_sends_a_revision_the_client_would_rewrite(
    hostile: HostileHub, revision: str
) -> None:
    hub = HubRepository(endpoint=hostile.url, token=None, retry_wait=0)

    with pytest.raises(ValueError, match="revision"):
        hub.repository_snapshot("acme/model", revision)

    assert hostile.count() == 0


def test_the_limits_the_admin_guide_states_are_the_codes() -> None:
    assert client.MAX_LISTING_PAGE_BYTES == 16 * MIB
    assert client.MAX_CONFIG_BYTES == 4 * MIB
    assert repository.MAX_MODEL_INFO_BYTES == 16 * MIB
    assert client.LISTING_DEADLINE_SECONDS == 120
    assert http.DEFAULT_MAX_REDIRECTS == 5
    assert MAX_LISTING_QUERIES == 256
    docs = Path(__file__).resolve().parents[4] / "docs"
    for page in ("ADMIN_GUIDE.md", "ADMIN_GUIDE.ru.md"):
        text = " ".join((docs / page).read_text(encoding="utf-8").split())
        russian = page.endswith(".ru.md")
        stated_limits = ("16 МиБ", "4 МиБ", "120 с") if russian else ("16 MiB", "4 MiB", "120 s")
        for stated in (*stated_limits, "не более 5 раз" if russian else "at most 5 times", "256"):
            assert stated in text, f"{page} does not state {stated!r}"
        for address in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"):
            assert address in text
        for name in http.METADATA_HOSTS - {"metadata", "metadata.goog"}:
            assert name in text
