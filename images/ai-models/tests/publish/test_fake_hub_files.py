"""The fake Hub's file serving, which the publisher tests rely on, checked against the real Hub's
behaviour it imitates (ranges, HEAD, ETags, blob listings, private repositories)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx2
import pytest

from fakes.hub import FakeHub, make_corpus, repository
from fakes.model_files import MIB, git_blob_id, synthetic_safetensors

WEIGHTS = synthetic_safetensors(3 * MIB + 1, seed=5)


@pytest.fixture
def served() -> Iterator[tuple[FakeHub, httpx2.Client]]:
    model = repository("acme/files", {"model.safetensors": WEIGHTS, "config.json": b"{}"})
    with FakeHub([model, *make_corpus(3)]) as hub, httpx2.Client(base_url=hub.url) as client:
        yield hub, client


def test_ranges_are_served_as_the_hub_serves_them(served: tuple[FakeHub, httpx2.Client]) -> None:
    _hub, client = served
    url = "/acme/files/resolve/main/model.safetensors"
    middle = client.get(url, headers={"Range": "bytes=1048570-1048589"})
    assert middle.status_code == 206
    assert middle.content == WEIGHTS.read(1048570, 20)
    assert middle.headers["content-range"] == f"bytes 1048570-1048589/{WEIGHTS.size}"
    suffix = client.get(url, headers={"Range": "bytes=-7"})
    assert suffix.content == WEIGHTS.read(WEIGHTS.size - 7, 7)
    open_ended = client.get(url, headers={"Range": f"bytes={WEIGHTS.size - 3}-"})
    assert open_ended.content == WEIGHTS.read(WEIGHTS.size - 3, 3)
    beyond = client.get(url, headers={"Range": f"bytes={WEIGHTS.size}-"})
    assert beyond.status_code == 416
    assert beyond.headers["content-range"] == f"bytes */{WEIGHTS.size}"


def test_head_and_get_carry_length_etag_and_commit(served: tuple[FakeHub, httpx2.Client]) -> None:
    hub, client = served
    head = client.head("/acme/files/resolve/main/model.safetensors")
    assert head.status_code == 200
    assert int(head.headers["content-length"]) == WEIGHTS.size
    assert head.headers["etag"] == f'"{WEIGHTS.sha256}"'
    assert head.headers["x-repo-commit"] == hub.model("acme/files").sha
    body = client.get("/acme/files/resolve/main/config.json")
    assert body.content == b"{}"
    assert body.headers["etag"] == f'"{git_blob_id(b"{}")}"'
    assert (
        hashlib.sha256(client.get("/acme/files/resolve/main/model.safetensors").content).hexdigest()
        == WEIGHTS.sha256
    )


def test_repositories_without_contents_list_blobs_as_before(served: tuple[FakeHub, httpx2.Client]) -> None:
    hub, client = served
    old = next(model for model in hub.models if model.contents is None)
    siblings = client.get(f"/api/models/{old.id}", params={"blobs": "true"}).json()["siblings"]
    for sibling in siblings:
        expected = len(old.config_bytes() or b"") if sibling["rfilename"] == "config.json" else 1
        assert sibling == {"rfilename": sibling["rfilename"], "size": expected}


def test_a_private_repository_is_hidden_from_strangers(served: tuple[FakeHub, httpx2.Client]) -> None:
    hub, client = served
    hub.update("acme/files", private_token="hf_owner")
    for path in ("/api/models/acme/files", "/acme/files/resolve/main/config.json"):
        stranger = client.get(path)
        assert stranger.status_code == 401
        assert stranger.headers["x-error-code"] == "RepoNotFound"
        assert client.get(path, headers={"Authorization": "Bearer hf_owner"}).status_code == 200
    assert (
        client.get("/api/models/acme/files", headers={"Authorization": "Bearer hf_owner"}).json()["private"]
        is True
    )
