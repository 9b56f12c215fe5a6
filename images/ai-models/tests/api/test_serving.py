"""The serving API against real peers: manifests and files of Ready objects from the directory store
and moto S3, byte ranges, conditional requests, and the caller's right to read the object.

Several ranges in one request are answered with the whole file (200): RFC 9110 lets a server
ignore `Range`, and the module's readers fetch one range at a time.
"""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore, S3Store
from ai_models.api.models_serving import ArtifactManifestView
from ai_models.api.serving.ranges import ByteRange, RangeNotSatisfiable, requested_range
from ai_models.domain.artifacts.layout import artifact_prefix, file_key, manifest_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import SourceType
from fakes.model_files import tiny_gguf
from fakes.s3 import S3Bucket

NAMESPACE = "team-a"
MIB = 1024**2
WEIGHTS = bytes(range(256)) * 400  # 102,400 bytes with a visible pattern
FILES = {
    "model.gguf": tiny_gguf(),
    "weights.bin": WEIGHTS,
    "tokenizer/vocab.json": b'{"a": 1}',
    "empty.txt": b"",
}


def quoted(text: str) -> str:
    return f'"{text}"'


def publish(
    cluster: Any, store: ObjectStore, name: str, files: Mapping[str, bytes], *, namespace: str | None
) -> tuple[Owner, str, bytes]:
    """A Ready object whose artifact holds `files`, as the publisher leaves it."""
    owner = cluster.model(name, namespace=namespace, status={"phase": "Publishing"})
    digest = "sha256:" + hashlib.sha256(f"{name}/{sorted(files)}".encode()).hexdigest()
    for path, data in files.items():
        store.put_bytes(file_key(owner, digest, path), data)
    manifest = manifest_to_json(
        ArtifactManifest(
            owner=owner,
            digest=digest,
            source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256="0" * 64),
            files=tuple(
                ArtifactFile(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest())
                for path, data in files.items()
            ),
            resolved={"format": "GGUF"},
            published_at="2026-02-01T12:00:00Z",
        )
    )
    store.put_bytes(manifest_key(owner, digest), manifest)
    size = sum(len(data) for data in files.values())
    cluster.set_status(
        owner,
        {
            "phase": "Ready",
            "artifact": {
                "uri": f"store://{artifact_prefix(owner, digest)}",
                "digest": digest,
                "sizeBytes": size,
            },
        },
    )
    return owner, digest, manifest


def base(owner: Owner) -> str:
    if owner.namespace:
        return f"/api/serving/v1/models/{owner.namespace}/{owner.name}"
    return f"/api/serving/v1/clustermodels/{owner.name}"


def problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:ai-models:problem:{kind}"
    return body


@pytest.fixture
def reader(api_cluster: Any) -> Any:
    return api_cluster.user("reader")


@pytest.fixture
def api(start_api: Any, store: DirectoryStore) -> Any:
    return start_api(store, api_object_cache_seconds=0)


@pytest.fixture
def http(api: Any, reader: Any) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=api.url, timeout=60, headers={"Authorization": f"Bearer {reader.token}"}
    ) as client:
        yield client


@pytest.fixture
def model(api_cluster: Any, store: DirectoryStore) -> tuple[Owner, str, bytes]:
    return publish(api_cluster, store, "llama", FILES, namespace=NAMESPACE)


@pytest.mark.parametrize("namespaced", [True, False], ids=["Model", "ClusterModel"])
def test_the_manifest_is_served_as_stored(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client, namespaced: bool
) -> None:
    owner, digest, manifest = publish(
        api_cluster, store, "m", FILES, namespace=NAMESPACE if namespaced else None
    )
    response = http.get(f"{base(owner)}/manifest")
    assert response.status_code == 200, response.text
    assert response.content == manifest
    assert response.headers["content-type"] == "application/json"
    assert response.headers["etag"] == quoted(digest)
    head = http.head(f"{base(owner)}/manifest")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len(manifest))
    assert head.headers["etag"] == quoted(digest)
    cached = http.get(f"{base(owner)}/manifest", headers={"If-None-Match": quoted(digest)})
    assert cached.status_code == 304
    assert cached.content == b""
    assert cached.headers["etag"] == quoted(digest)


def test_files_are_served_whole_with_their_sha256_as_etag(model: Any, http: httpx.Client) -> None:
    owner, _, _ = model
    for path, data in FILES.items():
        response = http.get(f"{base(owner)}/files/{path}")
        assert response.status_code == 200, (path, response.text)
        assert response.content == data
        assert response.headers["etag"] == quoted(hashlib.sha256(data).hexdigest())
        assert response.headers["accept-ranges"] == "bytes"
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["content-length"] == str(len(data))


SIZE = len(WEIGHTS)


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [
        ("bytes=0-9", 0, 9),
        ("bytes=100-", 100, SIZE - 1),
        ("bytes=-10", SIZE - 10, SIZE - 1),
        ("bytes=5000-999999999", 5000, SIZE - 1),
        (f"bytes={SIZE - 1}-{SIZE - 1}", SIZE - 1, SIZE - 1),
        ("bytes=-999999", 0, SIZE - 1),
        ("Bytes = 7 - 8", 7, 8),
    ],
)
def test_one_range_is_206(model: Any, http: httpx.Client, header: str, start: int, end: int) -> None:
    owner, _, _ = model
    response = http.get(f"{base(owner)}/files/weights.bin", headers={"Range": header})
    assert response.status_code == 206, response.text
    assert response.content == WEIGHTS[start : end + 1]
    assert response.headers["content-range"] == f"bytes {start}-{end}/{SIZE}"
    assert response.headers["content-length"] == str(end - start + 1)
    assert response.headers["etag"] == quoted(hashlib.sha256(WEIGHTS).hexdigest())
    head = http.head(f"{base(owner)}/files/weights.bin", headers={"Range": header})
    assert (head.status_code, head.content) == (206, b"")
    assert head.headers["content-range"] == response.headers["content-range"]
    assert head.headers["content-length"] == response.headers["content-length"]


@pytest.mark.parametrize(
    "header", ["bytes=0-1,5-6", "bytes=5-2", "items=0-1", "bytes=", "bytes=-", "bytes=a-b"]
)
def test_several_or_malformed_ranges_get_the_whole_file(model: Any, http: httpx.Client, header: str) -> None:
    owner, _, _ = model
    response = http.get(f"{base(owner)}/files/weights.bin", headers={"Range": header})
    assert response.status_code == 200
    assert response.content == WEIGHTS
    assert "content-range" not in response.headers


@pytest.mark.parametrize(
    ("path", "header"),
    [("weights.bin", f"bytes={SIZE}-"), ("weights.bin", "bytes=-0"), ("empty.txt", "bytes=0-")],
)
def test_a_range_past_the_end_is_416(model: Any, http: httpx.Client, path: str, header: str) -> None:
    owner, _, _ = model
    size = len(FILES[path])
    body = problem(
        http.get(f"{base(owner)}/files/{path}", headers={"Range": header}), 416, "range-not-satisfiable"
    )
    assert f"{size} bytes" in body["detail"]
    head = http.head(f"{base(owner)}/files/{path}", headers={"Range": header})
    assert head.status_code == 416
    assert head.headers["content-range"] == f"bytes */{size}"


def test_if_range_and_if_none_match(model: Any, http: httpx.Client) -> None:
    owner, _, _ = model
    url = f"{base(owner)}/files/weights.bin"
    etag = quoted(hashlib.sha256(WEIGHTS).hexdigest())
    assert http.get(url, headers={"Range": "bytes=0-3", "If-Range": etag}).status_code == 206
    stale = http.get(url, headers={"Range": "bytes=0-3", "If-Range": '"0000"'})
    assert (stale.status_code, stale.content) == (200, WEIGHTS)
    for tag in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        unchanged = http.get(url, headers={"If-None-Match": tag})
        assert (unchanged.status_code, unchanged.content) == (304, b""), tag
        assert unchanged.headers["etag"] == etag
    assert http.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    head = http.head(url)
    assert (head.status_code, head.content, head.headers["content-length"]) == (200, b"", str(SIZE))


@pytest.mark.parametrize(
    "path", ["nope.bin", "tokenizer", "files/model.gguf", "model.gguf/x", "manifest.json"]
)
def test_only_files_the_manifest_lists_are_served(model: Any, http: httpx.Client, path: str) -> None:
    owner, _, _ = model
    problem(http.get(f"{base(owner)}/files/{path}"), 404, "not-found")


@pytest.mark.parametrize("path", ["tokenizer/", ".hidden", "a//b", "-x", "tokenizer/%2E%2E/model.gguf"])
def test_paths_no_artifact_can_hold_are_invalid(model: Any, http: httpx.Client, path: str) -> None:
    owner, _, _ = model
    body = problem(http.get(f"{base(owner)}/files/{path}"), 400, "invalid-parameter")
    assert "path parameter path" in body["detail"]


def test_only_ready_objects_are_served(api_cluster: Any, http: httpx.Client) -> None:
    busy = api_cluster.model("busy", namespace=NAMESPACE, status={"phase": "Publishing"})
    body = problem(http.get(f"{base(busy)}/manifest"), 409, "wrong-phase")
    assert "Model team-a/busy is in phase Publishing, not Ready" in body["detail"]
    problem(http.get(f"{base(busy)}/files/model.gguf"), 409, "wrong-phase")
    body = problem(http.get("/api/serving/v1/clustermodels/absent/manifest"), 404, "not-found")
    assert "ClusterModel absent" in body["detail"]
    problem(http.get("/api/serving/v1/models/Bad_NS/x/manifest"), 400, "invalid-parameter")


def test_a_damaged_artifact_is_a_502_naming_the_file(
    model: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner, digest, _ = model
    store.delete(file_key(owner, digest, "weights.bin"))
    body = problem(http.get(f"{base(owner)}/files/weights.bin"), 502, "object-store-error")
    assert "weights.bin" in body["detail"]
    assert "damaged" in body["detail"]


def test_a_store_failure_is_a_502_that_does_not_show_where_the_store_is(
    model: Any, http: httpx.Client, store: DirectoryStore
) -> None:
    owner, digest, _ = model
    key = file_key(owner, digest, "weights.bin")
    store.delete(key)
    path = store.root / key
    path.symlink_to(path)  # ELOOP: a read fails with the store's own words, naming its directory
    body = problem(http.get(f"{base(owner)}/files/weights.bin"), 502, "object-store-error")
    assert "weights.bin" in body["detail"]
    assert "logged the cause" in body["detail"]
    assert str(store.root) not in body["detail"]


def test_the_caller_needs_get_on_the_object(api_cluster: Any, store: DirectoryStore, api: Any) -> None:
    model, _, _ = publish(api_cluster, store, "private", FILES, namespace=NAMESPACE)
    shared, _, _ = publish(api_cluster, store, "shared", FILES, namespace=None)
    member = api_cluster.user("member", namespace=NAMESPACE)
    outsider = api_cluster.user("outsider", namespace="default")
    everyone = api_cluster.user("cluster-reader")
    with httpx.Client(base_url=api.url, timeout=30) as http:

        def get(path: str, who: Any) -> httpx.Response:
            return http.get(path, headers={"Authorization": f"Bearer {who.token}"})

        assert get(f"{base(model)}/manifest", member).status_code == 200
        assert get(f"{base(model)}/files/weights.bin", everyone).status_code == 200
        body = problem(get(f"{base(model)}/files/weights.bin", outsider), 403, "forbidden")
        assert "get models.ai.deckhouse.io 'private' in namespace 'team-a'" in body["detail"]
        body = problem(get(f"{base(shared)}/manifest", member), 403, "forbidden")
        assert "clustermodels.ai.deckhouse.io 'shared' cluster-wide" in body["detail"]
        assert get(f"{base(shared)}/manifest", everyone).status_code == 200
        anonymous = http.get(f"{base(model)}/manifest")
        problem(anonymous, 401, "unauthenticated")
        assert anonymous.headers["www-authenticate"] == "Bearer"
        # Refused before the object is looked at: a forbidden caller cannot probe what exists.
        problem(get("/api/serving/v1/models/team-a/absent/manifest", outsider), 403, "forbidden")


def test_files_stream_in_constant_memory_and_are_counted(
    api_cluster: Any, store: DirectoryStore, api: Any, reader: Any
) -> None:
    size = 64 * MIB
    owner, digest, _ = publish(api_cluster, store, "big", {"small.bin": b"x"}, namespace=NAMESPACE)
    block = bytes(range(256)) * 4096
    store.put_stream(file_key(owner, digest, "big.bin"), io.BufferedReader(_Repeat(block, size)), size=size)
    manifest = manifest_to_json(
        ArtifactManifest(
            owner=owner,
            digest=digest,
            source=ArtifactSource(type=SourceType.UPLOAD),
            files=(ArtifactFile(path="big.bin", size=size, sha256="1" * 64),),
            resolved={},
            published_at="2026-02-01T12:00:00Z",
        )
    )
    store.put_bytes(manifest_key(owner, digest), manifest)
    received = 0
    tracemalloc.start()
    try:
        with (
            httpx.Client(
                base_url=api.url, timeout=60, headers={"Authorization": f"Bearer {reader.token}"}
            ) as http,
            http.stream("GET", f"{base(owner)}/files/big.bin") as response,
        ):
            assert response.status_code == 200
            for chunk in response.iter_raw(256 * 1024):
                received += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == size
    assert peak < 16 * MIB, f"serving a {size >> 20} MiB file peaked at {peak >> 20} MiB of Python memory"
    served = api.runtime.metrics.registry.get_sample_value("d8_ai_models_api_served_bytes_total")
    assert served >= size


class _Repeat(io.RawIOBase):
    def __init__(self, block: bytes, size: int) -> None:
        self._block = block
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), len(self._block), self._left)
        buffer[:count] = self._block[:count]
        self._left -= count
        return count


def test_ranges_are_read_from_s3(api_cluster: Any, start_api: Any, s3_bucket: S3Bucket, reader: Any) -> None:
    store = S3Store(
        s3_bucket.name, endpoint_url=s3_bucket.server.endpoint_url, session=s3_bucket.server.session()
    )
    api = start_api(store)
    owner, _, manifest = publish(api_cluster, store, "in-s3", FILES, namespace=None)
    with httpx.Client(
        base_url=api.url, timeout=60, headers={"Authorization": f"Bearer {reader.token}"}
    ) as http:
        assert http.get(f"{base(owner)}/manifest").content == manifest
        ranged = http.get(f"{base(owner)}/files/weights.bin", headers={"Range": "bytes=1000-1999"})
        assert (ranged.status_code, ranged.content) == (206, WEIGHTS[1000:2000])
        assert http.get(f"{base(owner)}/files/tokenizer/vocab.json").content == FILES["tokenizer/vocab.json"]
        assert http.get(f"{base(owner)}/files/empty.txt").content == b""


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 10, None),
        ("bytes=0-0", 1, ByteRange(0, 0)),
        ("bytes=0-", 10, ByteRange(0, 9)),
        ("bytes=-3", 10, ByteRange(7, 9)),
        ("bytes=3-1", 10, None),
        ("bytes=1-2, 4-5", 10, None),
        ("pages=1-2", 10, None),
    ],
)
def test_requested_range(header: str | None, size: int, expected: ByteRange | None) -> None:
    assert requested_range(header, size=size) == expected


@pytest.mark.parametrize(
    ("header", "size"), [("bytes=10-", 10), ("bytes=-0", 10), ("bytes=-5", 0), ("bytes=0-0", 0)]
)
def test_unsatisfiable_ranges(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiable) as raised:
        requested_range(header, size=size)
    assert raised.value.content_range == f"bytes */{size}"


def test_a_manifest_stored_with_etag_is_served_with_store_version(
    api_cluster: Any, store: DirectoryStore, http: httpx.Client
) -> None:
    """The store's per-file token is not called `etag` (D146): a file's HTTP ETag is its sha256."""
    owner, digest, _ = publish(api_cluster, store, "older", FILES, namespace=NAMESPACE)
    older = json.loads(store.get_bytes(manifest_key(owner, digest)))
    for item in older["files"]:
        item["etag"] = f'"store-{item["path"]}"'  # as manifests written before D146 say it
    store.put_bytes(manifest_key(owner, digest), json.dumps(older).encode())

    served = http.get(f"{base(owner)}/manifest")
    assert served.status_code == 200, served.text
    files = served.json()["files"]
    assert all("etag" not in item for item in files)
    assert {item["path"]: item["storeVersion"] for item in files} == {
        path: f'"store-{path}"' for path in FILES
    }
    ArtifactManifestView.model_validate_json(served.content)
    for item in files:
        head = http.head(f"{base(owner)}/files/{item['path']}")
        assert head.headers["etag"] == quoted(item["sha256"])
