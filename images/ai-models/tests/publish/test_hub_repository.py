"""`HubRepository`: the snapshot the controller plans with and the downloads the publisher makes,
against the fake Hub over HTTP."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from ai_models.adapters.hub import (
    HubRepository,
    ProviderForbidden,
    ProviderInvalidResponse,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
    repository_snapshot,
)
from ai_models.domain.artifacts.digest import SourceFile
from ai_models.domain.catalog.record import Gated
from fakes.hub import FakeHub, repository
from fakes.model_files import MIB, git_blob_id, lfs_pointer, synthetic_safetensors, tiny_gguf

REPO = "acme/snap"
WEIGHTS = synthetic_safetensors(2 * MIB + 5, seed=7)
CONFIG = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    model = repository(
        REPO,
        {"config.json": CONFIG, "model.safetensors": WEIGHTS, "tiny.gguf": tiny_gguf()},
        pipeline_tag="text-generation",
        library_name="transformers",
        tags=["transformers", "llama", "conversational"],
        gguf={"total": 768, "architecture": "llama", "context_length": 4096},
    )
    with FakeHub([model]) as running:
        yield running


def read_all(hub: FakeHub, path: str, *, revision: str = "main", token: str | None = None) -> bytes:
    client = HubRepository(endpoint=hub.url, token=token)
    with client.open_file(REPO, revision, path) as remote:
        return b"".join(iter(lambda: remote.read(300_000), b""))


def test_the_snapshot_pins_the_commit_and_lists_sizes_and_content_ids(hub: FakeHub) -> None:
    snapshot = repository_snapshot(REPO, "main", endpoint=hub.url, token=None)

    model = hub.model(REPO)
    assert snapshot.repository == REPO
    assert snapshot.sha == model.sha
    gguf = tiny_gguf()
    assert snapshot.files == (
        SourceFile("config.json", len(CONFIG), git_blob_id(CONFIG), None),
        SourceFile("model.safetensors", WEIGHTS.size, WEIGHTS.sha256, WEIGHTS.sha256),
        SourceFile(
            "tiny.gguf", len(gguf), hashlib.sha256(gguf).hexdigest(), hashlib.sha256(gguf).hexdigest()
        ),
    )
    assert snapshot.pipeline_tag == "text-generation"
    assert snapshot.library_name == "transformers"
    assert snapshot.tags == ("transformers", "llama", "conversational")
    assert snapshot.gguf == {"total": 768, "architecture": "llama", "context_length": 4096}
    assert snapshot.gated is Gated.NONE
    assert snapshot.private is False
    assert snapshot.file("config.json") == snapshot.files[0]
    assert snapshot.file("absent") is None
    assert lfs_pointer(WEIGHTS.sha256, WEIGHTS.size).startswith(b"version https://git-lfs")
    request = hub.requests("api")[-1]
    assert request.path == f"/api/models/{REPO}/revision/main"
    assert request.params("blobs") == ["true"]


def test_a_commit_revision_resolves_to_itself(hub: FakeHub) -> None:
    sha = hub.model(REPO).sha
    assert repository_snapshot(REPO, sha, endpoint=hub.url, token=None).sha == sha


def test_a_private_repository_needs_its_token_for_the_snapshot(hub: FakeHub) -> None:
    hub.update(REPO, private_token="hf_private")

    with pytest.raises(ProviderUnauthorized) as refused:
        repository_snapshot(REPO, "main", endpoint=hub.url, token=None)
    assert "no token was given" in refused.value.message
    assert "spec.source.authSecretRef" in refused.value.message
    with pytest.raises(ProviderUnauthorized) as wrong:
        repository_snapshot(REPO, "main", endpoint=hub.url, token="hf_other")
    assert "hf_other" not in wrong.value.message

    snapshot = repository_snapshot(REPO, "main", endpoint=hub.url, token="hf_private")
    assert snapshot.private is True


@pytest.mark.parametrize(
    ("repository_id", "revision", "cause"),
    [("acme/absent", "main", "the repository does not exist"), (REPO, "v9", "the revision does not exist")],
)
def test_missing_repository_or_revision_is_not_found(
    hub: FakeHub, repository_id: str, revision: str, cause: str
) -> None:
    with pytest.raises(ProviderNotFound) as missing:
        repository_snapshot(repository_id, revision, endpoint=hub.url, token=None)
    assert cause in missing.value.message
    assert repository_id in missing.value.message
    assert revision in missing.value.message
    assert missing.value.status == 404


def test_server_errors_are_retried_then_unavailable(hub: FakeHub) -> None:
    hub.error_next(2, status=503, bucket="api")
    client = HubRepository(endpoint=hub.url, token=None, retry_wait=0.01)
    assert client.repository_snapshot(REPO, "main").sha == hub.model(REPO).sha

    hub.error_next(10, status=500, bucket="api")
    with pytest.raises(ProviderUnavailable) as outage:
        client.repository_snapshot(REPO, "main")
    assert "HTTP 500" in outage.value.message


def test_rate_limit_carries_the_wait(hub: FakeHub) -> None:
    hub.rate_limit_next(1, retry_after="42", bucket="api")
    with pytest.raises(ProviderRateLimited) as limited:
        repository_snapshot(REPO, "main", endpoint=hub.url, token=None)
    assert limited.value.retry_after == 42


def test_forbidden_and_rejected_are_told_apart(hub: FakeHub) -> None:
    client = HubRepository(endpoint=hub.url, token="hf_x")
    hub.fail_next(1, status=403, bucket="api")
    with pytest.raises(ProviderForbidden):
        client.repository_snapshot(REPO, "main")
    hub.fail_next(1, status=400, bucket="api")
    with pytest.raises(ProviderRequestRejected):
        client.repository_snapshot(REPO, "main")


def test_a_web_page_instead_of_the_api_is_an_invalid_response(hub: FakeHub) -> None:
    hub.fail_next(1, status=200, bucket="api", body=b"<html>login</html>")
    with pytest.raises(ProviderInvalidResponse) as invalid:
        repository_snapshot(REPO, "main", endpoint=hub.url, token=None)
    assert "not a Hub model description" in invalid.value.message


def test_an_unreachable_endpoint_is_unavailable() -> None:
    with FakeHub() as stopped:
        url = stopped.url
    client = HubRepository(endpoint=url, token=None, max_retries=0)
    with pytest.raises(ProviderUnavailable) as unreachable:
        client.repository_snapshot(REPO, "main")
    assert "unreachable" in unreachable.value.message
    with pytest.raises(ProviderUnavailable), client.open_file(REPO, "main", "config.json"):
        pass


def test_downloads_stream_the_exact_bytes(hub: FakeHub) -> None:
    assert read_all(hub, "config.json") == CONFIG
    assert hashlib.sha256(read_all(hub, "model.safetensors")).hexdigest() == WEIGHTS.sha256
    client = HubRepository(endpoint=hub.url, token=None)
    with client.open_file(REPO, "main", "model.safetensors") as remote:
        assert remote.size == WEIGHTS.size
        assert remote.read(10) == WEIGHTS.read(0, 10)


def test_a_missing_file_names_the_file_repository_and_revision(hub: FakeHub) -> None:
    with pytest.raises(ProviderNotFound) as missing:
        read_all(hub, "nope.safetensors")
    assert "nope.safetensors of acme/snap at revision main" in missing.value.message
    assert "the file does not exist" in missing.value.message


def test_a_dropped_download_raises_unavailable_from_read(hub: FakeHub) -> None:
    hub.drop_next(1, after_bytes=MIB)
    with pytest.raises(ProviderUnavailable) as dropped:
        read_all(hub, "model.safetensors")
    assert "model.safetensors" in dropped.value.message


def test_cross_origin_redirects_drop_the_token_same_origin_keeps_it(hub: FakeHub) -> None:
    hub.update(REPO, private_token="hf_private")
    hub.redirect_lfs()

    data = read_all(hub, "model.safetensors", token="hf_private")

    assert hashlib.sha256(data).hexdigest() == WEIGHTS.sha256
    resolve, cdn = hub.requests("resolve")[-1], hub.requests("cdn")[-1]
    assert resolve.headers["authorization"] == "Bearer hf_private"
    assert "authorization" not in cdn.headers
    assert cdn.headers["user-agent"].startswith("ai-models/")


def test_gated_download_without_a_token_says_gated(hub: FakeHub) -> None:
    hub.update(REPO, gated="auto")
    with pytest.raises(ProviderUnauthorized) as gated:
        read_all(hub, "config.json")
    assert "is gated" in gated.value.message
