"""The Hub client against the fake Hub: what it sends, how it pages, how failures become reasons."""

from __future__ import annotations

import datetime
import socket
from collections.abc import Iterator

import pytest

from ai_models.adapters.hub import (
    HubClient,
    HubQuery,
    ProviderErrorReason,
    ProviderForbidden,
    ProviderInvalidResponse,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.hub.listing import LISTING_EXPAND
from ai_models.names import CatalogSort
from fakes.hub import FakeHub
from fakes.hub_corpus import make_corpus, make_model


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub(make_corpus(120, seed=3)) as fake:
        yield fake


@pytest.fixture
def client(hub: FakeHub) -> Iterator[HubClient]:
    with HubClient(endpoint=hub.url, token=None, retry_wait=0) as hub_client:
        yield hub_client


def walk(client: HubClient, query: HubQuery) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = client.list_page(query, cursor)
        ids.extend(model.id for model in page.models)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def test_first_page_sends_exactly_the_filters_sort_and_expand_the_hub_expects(
    hub: FakeHub, client: HubClient
) -> None:
    query = HubQuery(
        author="meta-llama",
        search="Instruct",
        pipeline_tag="text-generation",
        filters=("transformers", "conversational"),
        sort=CatalogSort.LIKES,
        limit=7,
    )

    client.list_page(query, None)

    (request,) = hub.requests("api")
    assert request.path == "/api/models"
    assert request.query == (
        ("author", "meta-llama"),
        ("search", "Instruct"),
        ("pipeline_tag", "text-generation"),
        ("filter", "transformers"),
        ("filter", "conversational"),
        ("gated", "false"),
        ("sort", "likes"),
        ("direction", "-1"),
        ("limit", "7"),
        *(("expand", name) for name in LISTING_EXPAND),
    )


@pytest.mark.parametrize(
    ("sort", "hub_key"),
    [
        (CatalogSort.DOWNLOADS, "downloads"),
        (CatalogSort.LIKES, "likes"),
        (CatalogSort.LAST_MODIFIED, "lastModified"),
        (CatalogSort.CREATED_AT, "createdAt"),
        (CatalogSort.TRENDING_SCORE, "trendingScore"),
    ],
)
def test_each_catalog_sort_maps_to_the_hub_sort_key(
    hub: FakeHub, client: HubClient, sort: CatalogSort, hub_key: str
) -> None:
    client.list_page(HubQuery(sort=sort, limit=5), None)

    assert hub.requests("api")[0].params("sort") == [hub_key]


def test_included_gated_models_send_no_gated_parameter(hub: FakeHub, client: HubClient) -> None:
    page = client.list_page(HubQuery(include_gated=True, limit=1000), None)

    assert hub.requests("api")[0].params("gated") == []
    assert {model.id for model in page.models} == {model.id for model in hub.models}


def test_next_page_is_the_link_url_requested_verbatim(hub: FakeHub, client: HubClient) -> None:
    query = HubQuery(author="meta-llama", limit=3)
    first = client.list_page(query, None)
    assert first.next_cursor is not None

    client.list_page(query, first.next_cursor)

    second = hub.requests("api")[1]
    assert first.next_cursor.startswith(hub.url + "/api/models?")
    assert hub.url + second.path + "?" + first.next_cursor.split("?", 1)[1] == first.next_cursor
    # The Link carries the filters: the second request asks the same question from a cursor.
    assert dict(second.query) | {"cursor": ""} == dict(hub.requests("api")[0].query) | {"cursor": ""}
    assert second.params("cursor")


def test_walking_the_cursor_lists_every_matching_model_once_in_hub_order(
    hub: FakeHub, client: HubClient
) -> None:
    query = HubQuery(sort=CatalogSort.DOWNLOADS, limit=9)

    ids = walk(client, query)

    ungated = sorted((model for model in hub.models if not model.gated), key=lambda model: model.id)
    expected = [model.id for model in sorted(ungated, key=lambda model: model.downloads, reverse=True)]
    assert ids == expected
    assert hub.count("api") == -(-len(expected) // 9)


def test_listing_entries_become_typed_models(hub: FakeHub, client: HubClient) -> None:
    llama = make_model("llama", 1)
    gguf = make_model("gguf", 2)
    hub.add(llama, gguf)

    page = client.list_page(HubQuery(search="-0000", limit=1000), None)

    by_id = {model.id: model for model in page.models}
    listed = by_id[llama.id]
    assert listed.sha == llama.sha
    assert listed.author == llama.author
    assert listed.pipeline_tag == "text-generation"
    assert listed.library_name == "transformers"
    assert listed.license == llama.license
    assert listed.downloads == llama.downloads
    assert listed.created_at == llama.created_at
    assert listed.last_modified == llama.last_modified
    assert listed.safetensors_parameters == llama.safetensors["parameters"]  # type: ignore[index]
    assert listed.has_file("config.json") is True
    assert listed.listing_config == {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    assert by_id[gguf.id].has_file("config.json") is False
    assert by_id[gguf.id].gguf is not None


def test_anonymous_client_sends_no_token_even_when_the_machine_has_one(
    hub: FakeHub, client: HubClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_machine_token")
    model = hub.models[0]
    with HubClient(endpoint=hub.url, token=None) as anonymous:
        anonymous.list_page(HubQuery(limit=2), None)
        anonymous.fetch_config(model.id, model.sha)

    assert [request.headers.get("authorization") for request in hub.requests()] == [None, None]


def test_token_is_sent_as_bearer_to_listing_and_resolver(hub: FakeHub) -> None:
    model = next(model for model in hub.models if model.config is not None and model.config_body is None)
    hub.require_token("hf_secret")
    with HubClient(endpoint=hub.url, token="hf_secret") as authenticated:
        authenticated.list_page(HubQuery(limit=2), None)
        config = authenticated.fetch_config(model.id, model.sha)

    assert config == model.config
    assert {request.headers.get("authorization") for request in hub.requests()} == {"Bearer hf_secret"}


def test_missing_token_is_provider_unauthorized_naming_endpoint_and_fix(
    hub: FakeHub, client: HubClient
) -> None:
    hub.require_token("hf_secret")

    with pytest.raises(ProviderUnauthorized) as raised:
        client.list_page(HubQuery(), None)

    assert raised.value.reason is ProviderErrorReason.UNAUTHORIZED
    assert str(raised.value.reason) == "ProviderUnauthorized"
    assert hub.url in raised.value.message
    assert "spec.huggingFace.tokenSecretRef" in raised.value.message


def test_wrong_token_is_provider_forbidden_and_never_appears_in_the_message(hub: FakeHub) -> None:
    hub.require_token("hf_right")
    with (
        HubClient(endpoint=hub.url, token="hf_wrong_value") as wrong,
        pytest.raises(ProviderForbidden) as raised,
    ):
        wrong.list_page(HubQuery(), None)

    assert raised.value.reason == "ProviderForbidden"
    assert "hf_wrong_value" not in str(raised.value)
    assert "spec.huggingFace.tokenSecretRef" in str(raised.value)


def test_listing_missing_at_the_endpoint_is_provider_not_found(hub: FakeHub) -> None:
    with (
        HubClient(endpoint=hub.url + "/not-a-hub", token=None) as client,
        pytest.raises(ProviderNotFound) as raised,
    ):
        client.list_page(HubQuery(), None)

    assert raised.value.reason == "ProviderNotFound"
    assert f"{hub.url}/not-a-hub" in str(raised.value)
    assert "spec.huggingFace.endpoint" in str(raised.value)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 1),  # already past: retry soon, not never
        ({"RateLimit": '"api";r=0;t=55', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}, 55),
        ({"RateLimit-Reset": "12"}, 12),
        ({}, 30),
    ],
)
def test_rate_limit_is_provider_rate_limited_with_the_wait_the_hub_asked_for(
    hub: FakeHub, client: HubClient, headers: dict[str, str], expected: int
) -> None:
    hub.rate_limit_next(1, headers=headers)

    with pytest.raises(ProviderRateLimited) as raised:
        client.list_page(HubQuery(), None)

    assert raised.value.retry_after == expected
    assert raised.value.reason == "ProviderRateLimited"
    assert hub.url in str(raised.value)
    assert hub.count("api") == 1  # not slept through: the controller waits and resumes


def test_retry_after_as_a_future_http_date_counts_seconds_from_now(hub: FakeHub) -> None:
    now = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.UTC)
    hub.rate_limit_next(1, retry_after="Sun, 01 Mar 2026 12:01:30 GMT")
    with (
        HubClient(endpoint=hub.url, token=None, clock=lambda: now) as client,
        pytest.raises(ProviderRateLimited) as raised,
    ):
        client.list_page(HubQuery(), None)

    assert raised.value.retry_after == 90


def test_momentary_server_error_is_retried(hub: FakeHub, client: HubClient) -> None:
    hub.error_next(1, status=502)

    page = client.list_page(HubQuery(limit=4), None)

    assert len(page.models) == 4
    assert [request.status for request in hub.requests("api")] == [502, 200]


def test_persistent_server_error_is_provider_unavailable(hub: FakeHub, client: HubClient) -> None:
    hub.error_next(10, status=503)

    with pytest.raises(ProviderUnavailable) as raised:
        client.list_page(HubQuery(), None)

    assert raised.value.reason == "ProviderUnavailable"
    assert raised.value.status == 503
    assert hub.url in str(raised.value)
    assert hub.count("api") == 3  # the first try and two retries


def test_unreachable_endpoint_is_provider_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"  # nothing listens there any more

    with (
        HubClient(endpoint=endpoint, token=None, max_retries=0) as client,
        pytest.raises(ProviderUnavailable) as raised,
    ):
        client.list_page(HubQuery(), None)

    assert endpoint in str(raised.value)
    assert "spec.huggingFace.endpoint" in str(raised.value)


def test_slow_hub_times_out_as_provider_unavailable(hub: FakeHub) -> None:
    hub.set_latency(1.0)
    with (
        HubClient(endpoint=hub.url, token=None, timeout=0.1, max_retries=0) as client,
        pytest.raises(ProviderUnavailable),
    ):
        client.list_page(HubQuery(), None)


def test_other_client_errors_are_provider_request_rejected(hub: FakeHub, client: HubClient) -> None:
    hub.fail_next(1, status=400)

    with pytest.raises(ProviderRequestRejected) as raised:
        client.list_page(HubQuery(), None)

    assert "spec.huggingFace" in str(raised.value)


@pytest.mark.parametrize("body", [b"<html>login</html>", b'{"models": []}'])
def test_a_listing_that_is_not_a_json_list_is_provider_invalid_response(
    hub: FakeHub, client: HubClient, body: bytes
) -> None:
    hub.fail_next(1, status=200, body=body)

    with pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    assert raised.value.reason == "ProviderInvalidResponse"


def test_a_next_link_to_another_host_is_refused(hub: FakeHub, client: HubClient) -> None:
    hub.fail_next(
        1,
        status=200,
        body=b"[]",
        headers={"Link": '<http://elsewhere.example/api/models?cursor=x>; rel="next"'},
    )

    with pytest.raises(ProviderInvalidResponse) as raised:
        client.list_page(HubQuery(), None)

    # The host is the remote's words: the message says what happened without repeating it.
    assert "another host" in str(raised.value)
    assert "elsewhere.example" not in str(raised.value)


def test_relative_next_link_is_resolved_against_the_endpoint(hub: FakeHub, client: HubClient) -> None:
    hub.fail_next(1, status=200, body=b"[]", headers={"Link": '</api/models?cursor=abc>; rel="next"'})

    page = client.list_page(HubQuery(), None)

    assert page.next_cursor == f"{hub.url}/api/models?cursor=abc"


def test_fetch_config_reads_config_json_at_the_listed_commit(hub: FakeHub, client: HubClient) -> None:
    model = make_model("deepseek", 9)
    hub.add(model)

    config = client.fetch_config(model.id, model.sha)

    assert config == model.config
    (request,) = hub.requests("resolve")
    assert request.path == f"/{model.id}/resolve/{model.sha}/config.json"


def test_fetch_config_is_none_for_a_missing_or_unreadable_config(hub: FakeHub, client: HubClient) -> None:
    gguf = make_model("gguf", 1)
    html = make_model("llama", 2)
    html.config_body = b"<!doctype html>"
    array = make_model("llama", 3)
    array.config = ["not", "a", "mapping"]
    gated = make_model("llama", 4)
    gated.gated = "manual"
    hub.add(gguf, html, array, gated)

    assert [client.fetch_config(model.id, model.sha) for model in (gguf, html, array, gated)] == [None] * 4
    assert [request.status for request in hub.requests("resolve")] == [404, 200, 200, 401]


def test_fetch_config_raises_on_rate_limit_because_it_is_not_about_the_model(
    hub: FakeHub, client: HubClient
) -> None:
    model = make_model("llama", 5)
    hub.add(model)
    hub.rate_limit_next(1, retry_after="3", bucket="resolve")

    with pytest.raises(ProviderRateLimited) as raised:
        client.fetch_config(model.id, model.sha)

    assert raised.value.retry_after == 3


def test_fetch_configs_makes_one_resolver_request_per_model(hub: FakeHub, client: HubClient) -> None:
    models = [
        model for model in client.list_page(HubQuery(limit=40), None).models if model.has_file("config.json")
    ]

    configs = client.fetch_configs(models)

    assert set(configs) == {model.id for model in models}
    assert hub.count("resolve") == len(models)
    assert sum(config is not None for config in configs.values()) >= len(models) // 2


def test_fetch_configs_stops_at_the_first_provider_error(hub: FakeHub) -> None:
    models = [model for model in hub.models if model.config is not None][:20]
    hub.error_next(100, status=503, bucket="resolve")
    with HubClient(endpoint=hub.url, token=None, config_concurrency=2, max_retries=0) as client:
        listed = client.list_page(HubQuery(include_gated=True, limit=1000), None).models
        wanted = [model for model in listed if model.id in {model.id for model in models}]
        with pytest.raises(ProviderUnavailable):
            client.fetch_configs(wanted)

    assert hub.count("resolve") < len(wanted)
