"""Byte streams handed out by the stores (`open_range`) and taken in by them (`put_stream`)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ai_models.adapters.objectstore.base import ByteSource, ObjectStoreError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Enough to keep syscalls and HTTP reads few; small enough not to matter per open stream.
READ_BUFFER_BYTES = 256 * 1024


class _SourceReader(io.RawIOBase):
    """A raw stream over any `read(n) -> bytes` (a file, an HTTP body) that stops after `limit` bytes.

    Failures while reading are passed through `translate`, so a reset connection halfway through
    a download reaches the caller as the store's error, naming the key, not as a urllib3 internal.
    """

    def __init__(
        self,
        read: Callable[[int], bytes],
        *,
        close: Callable[[], None],
        limit: int | None,
        translate: Callable[[Exception], Exception],
        readinto: Callable[[memoryview], int | None] | None = None,
    ) -> None:
        super().__init__()
        self._read = read
        self._readinto = readinto
        self._close = close
        self._remaining = limit
        self._translate = translate

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        wanted = len(view) if self._remaining is None else min(len(view), self._remaining)
        if wanted == 0:
            return 0
        try:
            if self._readinto is not None:
                # Straight into the caller's buffer: one copy fewer per piece than read() + slice.
                count = self._readinto(view[:wanted]) or 0
            else:
                data = self._read(wanted)
                count = len(data)
                view[:count] = data
        except ObjectStoreError:
            raise
        except Exception as exc:  # anything the source raises is the store failing mid-stream
            raise self._translate(exc) from exc
        if self._remaining is not None:
            self._remaining -= count
        return count

    def close(self) -> None:
        if not self.closed:
            try:
                self._close()
            finally:
                super().close()


def reader(
    read: Callable[[int], bytes],
    *,
    close: Callable[[], None],
    limit: int | None,
    translate: Callable[[Exception], Exception],
    readinto: Callable[[memoryview], int | None] | None = None,
) -> BinaryIO:
    """A buffered binary stream over `read` (or `readinto`, when the source has one), closing the
    source when closed."""
    raw = _SourceReader(read, close=close, limit=limit, translate=translate, readinto=readinto)
    return io.BufferedReader(raw, buffer_size=READ_BUFFER_BYTES)


def read_into(stream: ByteSource, view: memoryview) -> int:
    """One read of `stream` into `view`; 0 at the end. Straight into the buffer when the stream has
    `readinto`, else a `read` copied in: either way the caller's buffer is reused from read to
    read, where a fresh `bytes` per megabyte would cost the allocator fresh pages each time."""
    readinto = getattr(type(stream), "readinto", None)
    # io.RawIOBase declares readinto for subclasses to implement: one with only read() has none.
    if readinto is not None and readinto is not io.RawIOBase.readinto:
        return int(readinto(stream, view) or 0)
    data = stream.read(len(view))
    view[: len(data)] = data
    return len(data)


class SizeMismatch(ObjectStoreError):
    """A stream yielded a different number of bytes than promised (or more than a store can take)."""


class CountingSource(io.RawIOBase):
    """Reads the caller's stream for a store, counting bytes and holding it to its promised size.

    It never asks the stream for more than `chunk_bytes` at once, even when its own reader asks
    for everything (s3transfer does, once the stream is exhausted), so memory stays bounded
    whatever the stream is. It is not seekable, which makes s3transfer read parts sequentially
    and bound how many it holds. `limit` caps a stream of unknown size.
    """

    def __init__(
        self,
        stream: ByteSource,
        *,
        expected: int | None,
        limit: int | None = None,
        chunk_bytes: int,
        store: str,
        key: str,
    ) -> None:
        super().__init__()
        self._stream = stream
        self._expected = expected
        self._limit = limit
        self._chunk_bytes = chunk_bytes
        self._store = store
        self._key = key
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        return self._take(min(size, self._chunk_bytes))

    def readall(self) -> bytes:
        parts = []
        while chunk := self._take(self._chunk_bytes):
            parts.append(chunk)
        return b"".join(parts)

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Fills `buffer` (up to `chunk_bytes`) unless the stream ends, with no allocation."""
        view = memoryview(buffer).cast("B")[: self._chunk_bytes]
        got = 0
        while got < len(view):
            count = read_into(self._stream, view[got:])
            if not count:
                break
            got += count
        self._check(got, ended=got < len(view))
        return got

    def _take(self, size: int) -> bytes:
        # Fill the request even when the stream answers in short reads (sockets, chunked HTTP):
        # s3transfer takes a short first read for the whole (small) object and then reads "the
        # rest" in one go, and a short part in the middle of a multipart upload is refused by S3.
        pieces = []
        got = 0
        while got < size:
            piece = self._stream.read(size - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        self._check(got, ended=got < size)
        return b"".join(pieces)

    def _check(self, got: int, *, ended: bool) -> None:
        self.count += got
        if self._expected is not None:
            if self.count > self._expected:
                raise self._mismatch(f"the stream yielded more than the promised {self._expected} bytes")
            if ended and self.count < self._expected:
                raise self._mismatch(
                    f"the stream ended after {self.count} of the promised {self._expected} bytes"
                )
        elif self._limit is not None and self.count > self._limit:
            raise self._mismatch(
                f"the stream is longer than {self._limit} bytes, the most this store takes from a stream "
                "of unknown size; pass size= to put_stream"
            )

    def _mismatch(self, cause: str) -> SizeMismatch:
        # Raised before the write is committed, so nothing the caller can see has changed.
        return SizeMismatch(
            f"cannot write {self._key!r} ({self._store}): {cause}; the previous object, if any, is kept"
        )
