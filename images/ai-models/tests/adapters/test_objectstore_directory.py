"""What only the directory backend has to prove: it stays inside its root and hides its temp files."""

from __future__ import annotations

import concurrent.futures
import errno
import io
import os
from pathlib import Path

import pytest

from ai_models.adapters.objectstore import DirectoryStore, InvalidKey, ObjectNotFound, ObjectStoreError


class FailingStream(io.RawIOBase):
    """Yields some bytes, then fails like a dropped download."""

    def __init__(self, good: bytes) -> None:
        super().__init__()
        self._good = good

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self._good:
            chunk, self._good = self._good[: size or 1], self._good[size or 1 :]
            return chunk
        raise ConnectionResetError("download dropped")


def every_path(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> DirectoryStore:
    return DirectoryStore(root)


def test_hostile_keys_never_touch_files_outside_the_root(tmp_path: Path, store: DirectoryStore) -> None:
    (tmp_path / "outside").write_bytes(b"keep me")
    (tmp_path / "store").mkdir()
    before = every_path(tmp_path)
    attempts = [
        "../outside",
        "a/../../outside",
        "/" + str(tmp_path / "outside"),
        "..\\outside",
        "../store2/x",
    ]
    for key in attempts:
        for operation in (
            lambda key: store.put_bytes(key, b"pwned"),
            lambda key: store.put_stream(key, io.BytesIO(b"pwned")),
            store.delete,
            store.get_bytes,
        ):
            with pytest.raises(InvalidKey):
                operation(key)
    with pytest.raises(InvalidKey):
        store.delete_prefix("../")
    assert (tmp_path / "outside").read_bytes() == b"keep me"
    assert every_path(tmp_path) == before


def test_a_symbolic_link_out_of_the_root_is_not_followed(
    tmp_path: Path, root: Path, store: DirectoryStore
) -> None:
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    (secret_dir / "token").write_bytes(b"secret")
    root.mkdir()
    (root / "escape").symlink_to(secret_dir)
    store.put_bytes("visible", b"ok")

    for operation in (
        lambda: store.get_bytes("escape/token"),
        lambda: store.open_range("escape/token"),
        lambda: store.put_bytes("escape/planted", b"x"),
        lambda: store.delete("escape/token"),
        lambda: list(store.list("escape/")),
    ):
        with pytest.raises(ObjectStoreError, match="symbolic link"):
            operation()
    assert [info.key for info in store.list("")] == ["visible"]
    assert store.list_prefixes("") == []
    assert sorted(os.listdir(secret_dir)) == ["token"]


def test_temp_files_are_invisible(root: Path, store: DirectoryStore) -> None:
    (root / "catalog" / "hf").mkdir(parents=True)
    (root / "catalog" / "hf" / ".tmp-0123abcd").write_bytes(b"half a manifest")
    store.put_bytes("catalog/other/manifest.json", b"{}")
    assert [info.key for info in store.list("")] == ["catalog/other/manifest.json"]
    assert store.list_prefixes("catalog/") == ["catalog/other/"]


def test_a_failed_write_leaves_no_file_behind(root: Path, store: DirectoryStore) -> None:
    store.put_bytes("models/a/config.json", b"old")
    with pytest.raises(ConnectionResetError):
        store.put_stream("models/a/config.json", FailingStream(b"new but partial"))
    with pytest.raises(ConnectionResetError):
        store.put_stream("models/b/weights.bin", FailingStream(b"partial"))
    assert store.get_bytes("models/a/config.json") == b"old"
    assert every_path(root) == {"models", "models/a", "models/a/config.json"}


def test_directories_appear_on_demand_and_empty_ones_are_pruned(root: Path, store: DirectoryStore) -> None:
    assert not root.exists()
    store.put_bytes("artifacts/ns/model/digest/a/b/file", b"x")
    store.put_bytes("artifacts/ns/model/digest/keep", b"y")
    store.delete("artifacts/ns/model/digest/a/b/file")
    assert every_path(root) == {
        "artifacts",
        "artifacts/ns",
        "artifacts/ns/model",
        "artifacts/ns/model/digest",
    } | {"artifacts/ns/model/digest/keep"}
    assert store.delete_prefix("artifacts/ns/") == 1
    assert root.is_dir()
    assert every_path(root) == set()


def test_an_object_and_a_prefix_of_the_same_name_collide(store: DirectoryStore) -> None:
    store.put_bytes("a/b", b"object")
    with pytest.raises(ObjectStoreError, match="collides") as caught:
        store.put_bytes("a/b/c", b"nested")
    assert "'a/b/c'" in str(caught.value)
    store.put_bytes("x/y/z", b"nested")
    with pytest.raises(ObjectStoreError, match="collides"):
        store.put_bytes("x/y", b"object")
    with pytest.raises(ObjectNotFound):
        store.get_bytes("x/y")
    assert store.head("a/b/c") is None
    assert [info.key for info in store.list("")] == ["a/b", "x/y/z"]


def test_a_reader_keeps_the_version_it_opened(store: DirectoryStore) -> None:
    store.put_bytes("manifest.json", b"generation 1")
    with store.open_range("manifest.json") as stream:
        store.put_bytes("manifest.json", b"generation 2, longer")
        assert stream.read() == b"generation 1"
    assert store.get_bytes("manifest.json") == b"generation 2, longer"


def test_deletes_and_writes_racing_in_one_directory_do_not_fail(store: DirectoryStore) -> None:
    # A delete prunes the directory a concurrent write is about to create its temp file in.
    def churn(worker: int) -> None:
        for round_ in range(150):
            key = f"shared/dir/{worker}-{round_}"
            store.put_bytes(key, b"x")
            store.delete(key)

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(churn, range(6)))
    assert list(store.list("")) == []


def test_check_creates_a_missing_root(root: Path, store: DirectoryStore) -> None:
    store.check()
    assert root.is_dir()
    assert list(root.iterdir()) == []


def test_check_reports_a_root_that_is_a_file(root: Path, store: DirectoryStore) -> None:
    root.write_bytes(b"not a directory")
    with pytest.raises(ObjectStoreError, match="not a directory") as caught:
        store.check()
    assert str(root) in str(caught.value)
    assert "AI_MODELS_STORE_URL" in str(caught.value)


def test_check_reports_a_root_below_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ObjectStoreError, match="cannot use the store") as caught:
        DirectoryStore(tmp_path / "file" / "store").check()
    assert str(tmp_path / "file" / "store") in str(caught.value)


def test_a_relative_root_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        DirectoryStore("relative/dir")


def test_copy_range_copies_by_hand_where_the_kernel_cannot(
    root: Path, store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """copy_file_range refuses copies across file systems (EXDEV) and is missing on some (ENOSYS)."""
    calls = []

    def refuse(*args: object) -> int:
        calls.append(args)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    payload = bytes(range(256)) * 2048  # 512 KiB: several pieces of the copy by hand
    store.put_bytes("uploads/payload", payload)
    info = store.copy_range("artifacts/weights", "uploads/payload", start=100, length=len(payload) - 200)
    assert store.get_bytes("artifacts/weights") == payload[100:-100]
    assert info.size == len(payload) - 200
    assert len(calls) == 1  # tried once, then by hand for the rest
    assert every_path(root) == {
        "uploads",
        "uploads/payload",
        "artifacts",
        "artifacts/weights",
    }


def test_copy_range_fails_on_other_kernel_errors(
    store: DirectoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "copy_file_range", broken)
    store.put_bytes("src", b"data")
    with pytest.raises(ObjectStoreError, match="Input/output error"):
        store.copy_range("dst", "src", start=0, length=4)
    assert store.head("dst") is None
