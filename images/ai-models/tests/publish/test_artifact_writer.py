"""The artifact directory being written: verified files, the manifest last, cleanup of its own."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.domain.artifacts.layout import artifact_prefix, manifest_key
from ai_models.domain.artifacts.manifest import ArtifactSource
from ai_models.domain.storage.ledger import Owner
from ai_models.names import SourceType
from ai_models.publish.artifact import ArtifactWriter

OWNER = Owner(kind="Model", namespace="team-a", name="m", uid="u-1")
DIGEST = "sha256:" + "c" * 64


def finished(store: DirectoryStore) -> ArtifactWriter:
    writer = ArtifactWriter(store, OWNER, DIGEST)
    writer.begin()
    writer.put("a.json", io.BytesIO(b"{}"), size=2)
    writer.put("w.safetensors", io.BytesIO(b"x" * 100), size=100)
    writer.commit(
        ArtifactSource(type=SourceType.UPLOAD, upload_sha256="0" * 64), {"format": "Safetensors"}, "now"
    )
    return writer


def test_files_are_hashed_and_listed_in_the_manifest(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    writer = finished(store)
    published = writer.published()
    assert published is not None
    assert [(item.path, item.size, item.sha256) for item in published.files] == [
        ("a.json", 2, hashlib.sha256(b"{}").hexdigest()),
        ("w.safetensors", 100, hashlib.sha256(b"x" * 100).hexdigest()),
    ]


def test_a_finished_artifact_is_found_only_while_its_files_are_intact(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    finished(store)
    again = ArtifactWriter(store, OWNER, DIGEST)
    assert again.published() is not None
    store.put_bytes(artifact_prefix(OWNER, DIGEST) + "files/a.json", b"{}")  # same size, replaced
    assert again.published() is None


def test_discard_removes_only_what_an_attempt_began(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    finished(store)
    checking = ArtifactWriter(store, OWNER, DIGEST)
    checking.discard()  # it never began writing: the finished artifact stays
    assert store.head(manifest_key(OWNER, DIGEST)) is not None
    redoing = ArtifactWriter(store, OWNER, DIGEST)
    redoing.begin()
    assert store.head(manifest_key(OWNER, DIGEST)) is None
    redoing.discard()
    assert list(store.list(artifact_prefix(OWNER, DIGEST))) == []


def test_move_keeps_the_hash_and_removes_the_old_key(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    writer = ArtifactWriter(store, OWNER, DIGEST)
    writer.begin()
    stored = writer.put("config.json", io.BytesIO(b'{"a": 1}'), size=8)
    moved = writer.move("config.json", "model/config.json")
    assert moved.sha256 == stored.sha256
    assert [item.path for item in writer.files] == ["model/config.json"]
    assert store.get_bytes(writer.key("model/config.json")) == b'{"a": 1}'
    assert store.head(writer.key("config.json")) is None
