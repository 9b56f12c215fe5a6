"""The artifact manifest: what the publisher writes is what the controller and inventory read back;
anything else is a ManifestFormatError (the artifact counts as damaged), never another exception."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.manifest import (
    MANIFEST_SCHEMA,
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    ManifestFormatError,
    manifest_from_json,
    manifest_to_json,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind, SourceType

BOUNDED = settings(max_examples=200, deadline=None)
DIGEST = "sha256:" + hashlib.sha256(b"llama").hexdigest()
OWNER = Owner(kind=ModelKind.MODEL, namespace="team-a", name="llama", uid="uid-1")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


HUB_MANIFEST = ArtifactManifest(
    owner=OWNER,
    digest=DIGEST,
    source=ArtifactSource(
        type=SourceType.HUGGING_FACE,
        repository="meta-llama/Llama-3.2-1B-Instruct",
        revision="9213176726f574b556790deb65791e0c5aa438b6",
        endpoint="https://huggingface.co",
    ),
    files=(
        ArtifactFile(path="config.json", size=877, sha256=sha("config"), etag='"abc"'),
        ArtifactFile(path="model.safetensors", size=2_471_645_608, sha256=sha("weights"), etag='"def-1"'),
        ArtifactFile(path="tokenizer/tokenizer.json", size=9_085_657, sha256=sha("tokenizer")),
    ),
    resolved={"format": "Safetensors", "parameterCount": 1_235_814_400, "architectures": ["Llama"]},
    published_at="2026-01-02T03:04:05Z",
)
UPLOAD_MANIFEST = ArtifactManifest(
    owner=Owner(kind=ModelKind.CLUSTER_MODEL, namespace="", name="tiny", uid="uid-2"),
    digest="sha256:" + sha("upload"),
    source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256=sha("payload")),
    files=(ArtifactFile(path="model.gguf", size=1024, sha256=sha("gguf")),),
    resolved={},
    published_at="2026-01-02T03:04:05+00:00",
)


def document(manifest: ArtifactManifest = HUB_MANIFEST) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(manifest_to_json(manifest))
    return loaded


def encoded(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize("manifest", [HUB_MANIFEST, UPLOAD_MANIFEST])
def test_a_manifest_round_trips(manifest: ArtifactManifest) -> None:
    assert manifest_from_json(manifest_to_json(manifest)) == manifest


def test_the_stored_form_is_camel_case_json_with_the_schema_and_total_size() -> None:
    stored = document()
    assert stored["schema"] == MANIFEST_SCHEMA
    assert stored["sizeBytes"] == 877 + 2_471_645_608 + 9_085_657
    assert stored["owner"] == {"kind": "Model", "namespace": "team-a", "name": "llama", "uid": "uid-1"}
    assert stored["source"] == {
        "type": "HuggingFace",
        "repository": "meta-llama/Llama-3.2-1B-Instruct",
        "revision": "9213176726f574b556790deb65791e0c5aa438b6",
        "endpoint": "https://huggingface.co",
    }
    assert stored["files"][2] == {
        "path": "tokenizer/tokenizer.json",
        "size": 9_085_657,
        "sha256": sha("tokenizer"),
    }
    # The store's version token is not the HTTP ETag the serving API sends, nor called one (D146).
    assert stored["files"][0]["storeVersion"] == '"abc"'
    assert all("etag" not in item for item in stored["files"])
    assert stored["publishedAt"] == "2026-01-02T03:04:05Z"
    assert stored["resolved"]["parameterCount"] == 1_235_814_400
    assert document(UPLOAD_MANIFEST)["source"] == {"type": "Upload", "uploadSha256": sha("payload")}


def test_the_stored_form_is_stable_bytes() -> None:
    assert manifest_to_json(HUB_MANIFEST) == manifest_to_json(
        manifest_from_json(manifest_to_json(HUB_MANIFEST))
    )


def test_size_bytes_sums_the_files() -> None:
    assert HUB_MANIFEST.size_bytes == 877 + 2_471_645_608 + 9_085_657
    assert dataclasses.replace(HUB_MANIFEST, files=()).size_bytes == 0
    assert document(dataclasses.replace(HUB_MANIFEST, files=()))["sizeBytes"] == 0


def test_the_stored_total_is_recomputed_not_trusted() -> None:
    tampered = document() | {"sizeBytes": 1}
    assert manifest_from_json(encoded(tampered)).size_bytes == HUB_MANIFEST.size_bytes


def test_optional_fields_may_be_absent() -> None:
    stored = document()
    del stored["resolved"]
    for item in stored["files"]:
        item.pop("storeVersion", None)
    stored["source"] = {"type": "Catalog"}
    read = manifest_from_json(encoded(stored))
    assert read.resolved == {}
    assert all(item.etag is None for item in read.files)
    assert read.source == ArtifactSource(type=SourceType.CATALOG)


@pytest.mark.parametrize("schema", [0, 2, "1", None, [1]])
def test_an_unknown_schema_is_refused(schema: Any) -> None:
    with pytest.raises(ManifestFormatError, match="schema"):
        manifest_from_json(encoded(document() | {"schema": schema}))


def test_a_missing_schema_is_refused() -> None:
    stored = document()
    del stored["schema"]
    with pytest.raises(ManifestFormatError, match="schema"):
        manifest_from_json(encoded(stored))


def without(key: str) -> dict[str, Any]:
    stored = document()
    del stored[key]
    return stored


GARBAGE: list[bytes] = [
    b"",
    b" ",
    b"\xff\xfe\x00",
    b"not json",
    b"{",
    b"null",
    b"[]",
    b"[1, 2]",
    b"42",
    b'"manifest"',
    b"true",
    b"{}",
    encoded(without("owner")),
    encoded(without("digest")),
    encoded(without("source")),
    encoded(without("files")),
    encoded(without("publishedAt")),
    encoded(document() | {"owner": "team-a/llama"}),
    encoded(document() | {"owner": ["Model", "team-a", "llama", "uid-1"]}),
    encoded(document() | {"owner": {"kind": "Model", "namespace": "team-a", "name": "llama"}}),
    encoded(document() | {"owner": document()["owner"] | {"extra": 1}}),
    encoded(document() | {"source": "HuggingFace"}),
    encoded(document() | {"source": {"repository": "org/name"}}),
    encoded(document() | {"source": {"type": "Git"}}),
    encoded(document() | {"files": None}),
    encoded(document() | {"files": 3}),
    encoded(document() | {"files": "model.safetensors"}),
    encoded(document() | {"files": ["model.safetensors"]}),
    encoded(document() | {"files": [{"path": "x", "size": "large", "sha256": "ab"}]}),
    encoded(document() | {"files": [{"path": "x", "sha256": "ab"}]}),
    encoded(document() | {"files": [{"path": "x", "size": None, "sha256": "ab"}]}),
    encoded(document() | {"resolved": "yes"}),
    encoded(document() | {"resolved": [1, 2]}),
]


@pytest.mark.parametrize("data", GARBAGE)
def test_garbage_is_a_manifest_format_error(data: bytes) -> None:
    with pytest.raises(ManifestFormatError, match="unreadable artifact manifest"):
        manifest_from_json(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
KEYS = ("schema", "owner", "digest", "source", "files", "resolved", "publishedAt")


@given(data=st.binary(max_size=64))
@BOUNDED
def test_arbitrary_bytes_read_as_a_manifest_or_a_format_error(data: bytes) -> None:
    with contextlib.suppress(ManifestFormatError):
        assert isinstance(manifest_from_json(data), ArtifactManifest)


@given(replacements=st.dictionaries(st.sampled_from(KEYS), JSON, min_size=1))
@BOUNDED
def test_any_field_replaced_by_any_json_reads_or_is_a_format_error(replacements: dict[str, Any]) -> None:
    try:
        read = manifest_from_json(encoded(document() | replacements))
    except ManifestFormatError:
        return
    assert isinstance(read, ArtifactManifest)
    assert read.size_bytes == sum(item.size for item in read.files)


def test_a_manifest_written_with_etag_reads_its_store_version() -> None:
    older = document()
    for item in older["files"]:
        if "storeVersion" in item:
            item["etag"] = item.pop("storeVersion")
    read = manifest_from_json(encoded(older))
    assert read == HUB_MANIFEST
    assert manifest_to_json(read) == manifest_to_json(HUB_MANIFEST)
