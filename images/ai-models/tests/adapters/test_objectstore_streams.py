"""The stream adapters under both backends: what callers read and what stores take in."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from ai_models.adapters.objectstore import ByteSource, ObjectStoreError, SizeMismatch
from ai_models.adapters.objectstore.streams import CountingSource, read_into, reader


class Trickle:
    """A source that answers every read with at most `step` bytes, like a socket."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = io.BytesIO(data)
        self._step = step
        self.asked: list[int] = []

    def read(self, size: int = -1, /) -> bytes:
        self.asked.append(size)
        return self._data.read(min(size, self._step))


def test_a_failure_while_streaming_becomes_the_stores_error() -> None:
    def broken(size: int) -> bytes:
        raise ConnectionResetError("peer reset")

    stream = reader(
        broken,
        close=lambda: None,
        limit=None,
        translate=lambda exc: ObjectStoreError(f"cannot read 'k' (store): {exc}"),
    )
    with pytest.raises(ObjectStoreError, match=r"cannot read 'k'.*peer reset") as caught:
        stream.read(10)
    assert isinstance(caught.value.__cause__, ConnectionResetError)


def test_a_reader_stops_at_its_limit_and_closes_its_source() -> None:
    closed = []
    source = io.BytesIO(b"0123456789")
    stream = reader(source.read, close=lambda: closed.append(True), limit=4, translate=lambda exc: exc)
    assert stream.read() == b"0123"
    stream.close()
    assert closed == [True]


def test_counting_source_fills_each_read_from_short_reads() -> None:
    trickle = Trickle(b"x" * 1000, step=7)
    source = CountingSource(trickle, expected=1000, chunk_bytes=300, store="s", key="k")
    assert [len(chunk) for chunk in iter(lambda: source.read(300), b"")] == [300, 300, 300, 100]
    assert source.count == 1000
    assert max(trickle.asked) <= 300


class OnlyRead(io.RawIOBase):
    """A raw stream implementing read() alone, as many wrappers do; its inherited readinto raises."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._data.read(size)


@pytest.mark.parametrize("make", [io.BytesIO, OnlyRead, lambda data: Trickle(data, step=7)])
def test_read_into_takes_any_byte_source(make: Callable[[bytes], ByteSource]) -> None:
    buffer = memoryview(bytearray(5))
    source = make(b"abcdefgh")
    pieces = []
    while count := read_into(source, buffer):
        pieces.append(bytes(buffer[:count]))
    assert b"".join(pieces) == b"abcdefgh"


def test_counting_source_fills_a_reused_buffer_from_short_reads() -> None:
    data = bytes(range(256)) * 4
    source = CountingSource(Trickle(data, step=7), expected=len(data), chunk_bytes=300, store="s", key="k")
    buffer = memoryview(bytearray(512))  # larger than chunk_bytes: never filled past it
    pieces = []
    while count := source.readinto(buffer):
        pieces.append(bytes(buffer[:count]))
    assert [len(piece) for piece in pieces] == [300, 300, 300, 124]
    assert b"".join(pieces) == data
    assert source.count == len(data)


def test_counting_source_into_a_buffer_holds_the_stream_to_its_promise() -> None:
    source = CountingSource(io.BytesIO(b"x" * 10), expected=11, chunk_bytes=64, store="s", key="k")
    with pytest.raises(SizeMismatch, match="ended after 10 of the promised 11"):
        source.readinto(bytearray(64))
    longer = CountingSource(io.BytesIO(b"x" * 12), expected=11, chunk_bytes=64, store="s", key="k")
    with pytest.raises(SizeMismatch, match="more than the promised 11"):
        longer.readinto(bytearray(64))


def test_counting_source_never_asks_for_everything() -> None:
    trickle = Trickle(b"x" * 1000, step=1000)
    source = CountingSource(trickle, expected=None, chunk_bytes=128, store="s", key="k")
    assert source.read() == b"x" * 1000
    assert max(trickle.asked) <= 128


def test_a_stream_of_unknown_size_beyond_the_limit_is_refused() -> None:
    source = CountingSource(
        io.BytesIO(b"x" * 100), expected=None, limit=64, chunk_bytes=16, store="s", key="k"
    )
    with pytest.raises(SizeMismatch, match="pass size="):
        source.read()
