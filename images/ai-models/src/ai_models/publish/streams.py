"""Byte streams of the publisher: pass-throughs that hash and count, and a seekable view of a
stored object for formats that need random access (zip, plain tar).

All keep memory bounded whatever the size of the data: the pass-throughs hold nothing, the
seekable view one read buffer.
"""

from __future__ import annotations

import errno
import hashlib
import io
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ai_models.adapters.objectstore import ByteSource, ObjectStore
from ai_models.adapters.objectstore.streams import read_into

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MIB = 1024 * 1024
GZIP_INPUT_BYTES = 64 * 1024
# The most a gzip read yields at once: deflate expands up to 1032 times, so an input piece of
# zeros is bounded by its output, never by itself.
GZIP_OUTPUT_BYTES = MIB
_GZIP_MAGIC = b"\x1f\x8b"


class GzipEnded(zlib.error):
    """The gzip stream ends before its last member does (a truncated upload)."""


class GzipReader:
    """The decompressed bytes of a gzip stream, at most `GZIP_OUTPUT_BYTES` per read.

    `on_output` hears of every decompressed piece before it is returned, so a budget can stop an
    archive bomb while memory holds one piece. Members written one after another (`cat a.gz
    b.gz`) are read as one stream, as gzip -d does; bytes after the last member that do not start
    another one are left unread. Each member's CRC and length are checked by zlib at its end.
    """

    def __init__(self, source: ByteSource, *, on_output: Callable[[int], None]) -> None:
        self._source = source
        self._on_output = on_output
        self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._pending = b""  # input read but not yet given to the decompressor
        self._done = False
        self.position = 0  # decompressed bytes returned so far

    def read(self, size: int = -1, /) -> bytes:
        wanted = GZIP_OUTPUT_BYTES if size < 0 else min(size, GZIP_OUTPUT_BYTES)
        while wanted and not self._done:
            if self._inflate.eof:
                self._next_member()
                continue
            data = self._inflate.unconsumed_tail or self._take_input()
            if not data:
                raise GzipEnded("the gzip stream ends before its end (truncated)")
            out = self._inflate.decompress(data, wanted)
            if out:
                self._on_output(len(out))
                self.position += len(out)
                return out
        return b""

    def _take_input(self) -> bytes:
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        return self._source.read(GZIP_INPUT_BYTES)

    def _next_member(self) -> None:
        rest = self._inflate.unused_data
        while len(rest) < len(_GZIP_MAGIC) and (more := self._source.read(GZIP_INPUT_BYTES)):
            rest += more
        if not rest.startswith(_GZIP_MAGIC):
            self._done = True
            return
        self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self._pending = rest


class ExactReader:
    """Exactly `size` bytes of `source`: `too_short` is raised when it ends sooner, and
    `too_long` when it has more (a zip member whose declared size lies)."""

    def __init__(
        self,
        source: ByteSource,
        size: int,
        *,
        too_short: Callable[[int], Exception],
        too_long: Callable[[], Exception],
    ) -> None:
        self._source = source
        self._left = size
        self._too_short = too_short
        self._too_long = too_long
        self._size = size

    def read(self, size: int = -1, /) -> bytes:
        if self._left == 0:
            if self._source.read(1):
                raise self._too_long()
            return b""
        data = self._source.read(min(MIB if size < 0 else size, self._left))
        if not data:
            raise self._too_short(self._size - self._left)
        self._left -= len(data)
        return data


class CountingReader:
    """Counts what is read through it; `on_bytes` hears of each piece."""

    def __init__(self, source: ByteSource, *, on_bytes: Callable[[int], None] | None = None) -> None:
        self._source = source
        self._on_bytes = on_bytes
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._source.read(size)
        self.count += len(data)
        if data and self._on_bytes is not None:
            self._on_bytes(len(data))
        return data

    def drain(self, chunk_bytes: int = MIB) -> None:
        while self.read(chunk_bytes):
            pass


class HashingReader:
    """Everything read through it is counted and hashed (sha256); `on_bytes` hears of each piece.

    The hash runs in the reading thread: hashlib releases the GIL while it hashes, so files read
    in parallel hash in parallel, and a hand-over to a hashing thread of its own cost more in
    thread switches (one per 64 KiB piece of an HTTP body) than it saved. `readinto` hashes the
    caller's reused buffer, so a store that reads that way allocates nothing per piece.
    """

    def __init__(self, source: ByteSource, *, on_bytes: Callable[[int], None] | None = None) -> None:
        self._source = source
        self._hash = hashlib.sha256()
        self._on_bytes = on_bytes
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._source.read(size)
        self._seen(data)
        return data

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        """Fills `buffer` unless the source ends first, then hashes it in one call: one GIL
        release per buffer instead of one per 64 KiB piece of an HTTP body, which two files
        hashed at once would otherwise contend on."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view) and (count := read_into(self._source, view[filled:])):
            filled += count
        self._seen(view[:filled])
        return filled

    def _seen(self, data: bytes | memoryview) -> None:
        if data:
            self._hash.update(data)
            self.count += len(data)
            if self._on_bytes is not None:
                self._on_bytes(len(data))

    def close(self) -> None:
        """Closes the source, when it can be closed."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class StoreFile(io.RawIOBase):
    """A read-only, seekable file over one stored object, through ranged reads.

    After a seek the next read opens a range of `first_window` bytes; reading on sequentially
    doubles the window up to `max_window`, so scattered small reads (a zip's directory) cost
    small requests and a long sequential read costs few.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        size: int,
        first_window: int = MIB,
        max_window: int = 256 * MIB,
    ) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._size = size
        self._position = 0
        self._stream: BinaryIO | None = None
        self._stream_end = 0  # exclusive end of the open range
        self._first_window = first_window
        self._max_window = max_window
        self._window = first_window

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        target = base + offset
        if target < 0:
            # As a file does: zipfile takes OSError from a seek before the start for "no zip".
            raise OSError(errno.EINVAL, f"cannot seek to {target}, before the start of the object")
        if target != self._position:
            # zipfile seeks to where it already is before every read; only a real move costs a request.
            self._drop()
            self._window = self._first_window
            self._position = target
        return self._position

    def readinto(self, buffer: WriteableBuffer) -> int:
        """Fills `buffer` unless the object ends first: zipfile takes a short read for the end."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(view) and self._position < self._size:
            if self._stream is None or self._position >= self._stream_end:
                self._open()
            assert self._stream is not None
            wanted = min(len(view) - filled, self._stream_end - self._position)
            data = self._stream.read(wanted)
            if not data:
                break  # the object is shorter than its listed size
            view[filled : filled + len(data)] = data
            filled += len(data)
            self._position += len(data)
        return filled

    def close(self) -> None:
        self._drop()
        super().close()

    def _open(self) -> None:
        self._drop()
        end = min(self._size, self._position + self._window)
        self._stream = self._store.open_range(self._key, start=self._position, end=end - 1)
        self._stream_end = end
        self._window = min(self._window * 2, self._max_window)

    def _drop(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
