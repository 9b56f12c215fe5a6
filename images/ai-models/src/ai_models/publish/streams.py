"""Byte streams of the publisher: a pass-through that hashes and counts, and a seekable view of a
stored object for formats that need random access (zip).

Both keep memory bounded whatever the size of the data: the hashing reader holds nothing, the
seekable view holds one read buffer.
"""

from __future__ import annotations

import collections
import hashlib
import io
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ai_models.adapters.objectstore import ByteSource, ObjectStore

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MIB = 1024 * 1024


class BackgroundSha256:
    """sha256 computed on a thread of its own, so hashing overlaps reading and writing.

    hashlib releases the GIL while it hashes, so on a second core the hash costs the data path
    little. Small pieces (an HTTP body arrives in 64 KiB reads) are gathered into `batch` bytes
    first: each hand-over and each GIL release costs a thread switch. At most `max_pending`
    bytes wait to be hashed (the caller blocks beyond that), which bounds memory. `update` must
    be called from one thread at a time, and pieces must not change afterwards (bytes never do).
    """

    def __init__(self, *, batch: int = MIB, max_pending: int = 16 * MIB) -> None:
        self._hash = hashlib.sha256()
        self._batch_size = batch
        self._gathered: list[bytes] = []
        self._gathered_bytes = 0
        self._pending: collections.deque[list[bytes]] = collections.deque()
        self._pending_bytes = 0
        self._max_pending = max_pending
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="sha256", daemon=True)
        self._thread.start()
        self._digest: str | None = None

    def update(self, data: bytes) -> None:
        self._gathered.append(data)
        self._gathered_bytes += len(data)
        if self._gathered_bytes >= self._batch_size:
            self._hand_over()

    def hexdigest(self) -> str:
        if self._digest is None:
            self._hand_over()
            with self._changed:
                self._closed = True
                self._changed.notify_all()
            self._thread.join()
            self._digest = self._hash.hexdigest()
        return self._digest

    def _hand_over(self) -> None:
        if not self._gathered:
            return
        pieces, size = self._gathered, self._gathered_bytes
        self._gathered, self._gathered_bytes = [], 0
        with self._changed:
            while self._pending_bytes and self._pending_bytes + size > self._max_pending:
                self._changed.wait()
            self._pending.append(pieces)
            self._pending_bytes += size
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._closed:
                    self._changed.wait()
                if not self._pending:
                    return
                pieces = self._pending.popleft()
            # Joined here, not by the caller: a large join releases the GIL, like the hash does.
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            self._hash.update(data)
            with self._changed:
                self._pending_bytes -= len(data)
                self._changed.notify_all()


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
    """Everything read through it is counted and hashed (sha256, on a thread of its own); `on_bytes`
    hears of each piece. Call `hexdigest` once the stream is consumed; `close` if it is abandoned."""

    def __init__(self, source: ByteSource, *, on_bytes: Callable[[int], None] | None = None) -> None:
        self._source = source
        self._hash = BackgroundSha256()
        self._on_bytes = on_bytes
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._source.read(size)
        if data:
            self._hash.update(bytes(data))
            self.count += len(data)
            if self._on_bytes is not None:
                self._on_bytes(len(data))
        return data

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the hashing thread of an abandoned stream."""
        self._hash.hexdigest()


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
            raise ValueError(f"cannot seek to {target}, before the start of {self._key!r}")
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
