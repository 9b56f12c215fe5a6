"""The publisher's byte streams: the hashing pass-through and the seekable view of a stored object."""

from __future__ import annotations

import hashlib
import io
import random
import zipfile
from pathlib import Path

import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.publish.streams import CountingReader, HashingReader, StoreFile


class Pieces(io.RawIOBase):
    """Hands out `data` in pieces of random small sizes, as a socket does."""

    def __init__(self, data: bytes, *, seed: int = 0) -> None:
        super().__init__()
        self._data = data
        self._at = 0
        self._random = random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        limit = len(self._data) if size is None or size < 0 else size
        count = min(limit, self._random.randint(1, 70_000))
        piece = self._data[self._at : self._at + count]
        self._at += len(piece)
        return piece


@pytest.mark.parametrize("size", [0, 1, 65_536, 3 * 1024 * 1024 + 7])
def test_hashing_reader_hashes_and_counts_what_passes(size: int) -> None:
    data = random.Random(size).randbytes(size)
    seen: list[int] = []
    reader = HashingReader(Pieces(data), on_bytes=seen.append)
    out = b"".join(iter(lambda: reader.read(1 << 20), b""))
    assert out == data
    assert reader.hexdigest() == hashlib.sha256(data).hexdigest()
    assert reader.count == size == sum(seen)


@pytest.mark.parametrize("size", [0, 1, 3 * 1024 * 1024 + 7])
def test_hashing_reader_hashes_what_it_reads_into_a_buffer(size: int) -> None:
    data = random.Random(size).randbytes(size)
    seen: list[int] = []
    reader = HashingReader(Pieces(data), on_bytes=seen.append)
    buffer = memoryview(bytearray(1 << 20))
    out = bytearray()
    while count := reader.readinto(buffer):
        out += buffer[:count]
    assert out == data
    assert reader.hexdigest() == hashlib.sha256(data).hexdigest()
    assert reader.count == size == sum(seen)


def test_counting_reader_drains_to_the_end() -> None:
    reader = CountingReader(io.BytesIO(b"x" * 5000))
    reader.read(10)
    reader.drain(chunk_bytes=999)
    assert reader.count == 5000


@pytest.fixture
def stored(tmp_path: Path) -> tuple[DirectoryStore, bytes]:
    store = DirectoryStore(tmp_path / "store")
    data = random.Random(1).randbytes(300_000)
    store.put_bytes("payload", data)
    return store, data


def test_store_file_reads_seeks_and_fills_buffers(stored: tuple[DirectoryStore, bytes]) -> None:
    store, data = stored
    with StoreFile(store, "payload", size=len(data), first_window=1000, max_window=8000) as file:
        assert file.read(5000) == data[:5000]  # spans several windows, yet one full read
        assert file.tell() == 5000
        file.seek(-100, io.SEEK_END)
        assert file.read() == data[-100:]
        file.seek(123_456)
        assert file.read(10) == data[123_456:123_466]
        file.seek(10, io.SEEK_CUR)
        assert file.read(5) == data[123_476:123_481]
        file.seek(len(data) + 5)
        assert file.read(10) == b""
        with pytest.raises(OSError, match="before the start"):
            file.seek(-1)


def test_store_file_opens_few_ranges_for_sequential_reads(stored: tuple[DirectoryStore, bytes]) -> None:
    store, data = stored
    opened: list[tuple[int, int | None]] = []

    class Counting(DirectoryStore):
        def open_range(self, key: str, *, start: int = 0, end: int | None = None):  # type: ignore[no-untyped-def]
            opened.append((start, end))
            return super().open_range(key, start=start, end=end)

    counting = Counting(store.root)
    with StoreFile(counting, "payload", size=len(data), first_window=1000, max_window=1 << 20) as file:
        file.seek(0)  # a seek to where it is costs nothing (zipfile does this before every read)
        assert file.read() == data
    # Windows double: 1000, 2000, 4000, ... reach 300,000 bytes in a handful of requests.
    assert len(opened) <= 9
    assert opened[0] == (0, 999)


def test_zipfile_reads_through_a_store_file(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "store")
    buffer = io.BytesIO()
    members = {f"dir/file-{index}.json": random.Random(index).randbytes(50_000) for index in range(5)}
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    store.put_bytes("archive.zip", buffer.getvalue())
    with (
        StoreFile(store, "archive.zip", size=len(buffer.getvalue()), first_window=4096) as file,
        zipfile.ZipFile(file) as archive,
    ):
        assert {info.filename: archive.read(info) for info in archive.infolist()} == members
