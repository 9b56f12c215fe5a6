"""A request body carried from the event loop to a blocking reader thread, in bounded memory.

The object stores are synchronous (`put_stream` reads a `read(n)` source in a thread); request
bodies arrive as chunks on the event loop. The loop side `put`s chunks and waits while
`max_buffered` bytes are in flight; the thread side `read`s them and wakes the loop as it makes
room. Either side can stop the other: the loop `fail`s the pipe (the client went away, it stalled,
the request was cancelled) and the reader raises that error; the reader `abandon`s it (the store
failed) and the loop's next `put` raises `ReaderGone`.
"""

from __future__ import annotations

import asyncio
import collections
import threading


class ReaderGone(Exception):
    """The reading side stopped before the body ended; the rest of it is not wanted."""


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class BodyPipe:
    def __init__(self, *, loop: asyncio.AbstractEventLoop, max_buffered: int) -> None:
        self._loop = loop
        self._max = max_buffered
        self._lock = threading.Condition()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._ended = False
        self._failure: BaseException | None = None
        self._abandoned = False
        self._room: asyncio.Future[None] | None = None

    # The event loop's side.

    async def put(self, chunk: bytes) -> None:
        """Hand `chunk` to the reader, waiting while the pipe is full; raises ReaderGone."""
        if not chunk:
            return
        while True:
            with self._lock:
                if self._abandoned:
                    raise ReaderGone
                if self._buffered < self._max:
                    self._chunks.append(chunk)
                    self._buffered += len(chunk)
                    self._lock.notify_all()
                    return
                room = self._room = self._loop.create_future()
            await room

    def end(self) -> None:
        """The body is complete: the reader gets what is left, then b''."""
        with self._lock:
            self._ended = True
            self._lock.notify_all()

    def fail(self, error: BaseException) -> None:
        """The body will not complete: the reader's next `read` raises `error`."""
        with self._lock:
            if self._failure is None:
                self._failure = error
            self._chunks.clear()
            self._buffered = 0
            self._lock.notify_all()

    # The reader thread's side.

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes (a short read is fine), b'' at the end; blocks until some arrive."""
        with self._lock:
            while True:
                if self._failure is not None:
                    raise self._failure
                if self._chunks:
                    break
                if self._ended:
                    return b""
                self._lock.wait()
            chunk = self._chunks.popleft()
            if 0 <= size < len(chunk):
                self._chunks.appendleft(chunk[size:])
                chunk = chunk[:size]
            self._buffered -= len(chunk)
            self._wake_writer()
            return chunk

    def abandon(self) -> None:
        """The reader stops: pending and future `put`s raise ReaderGone."""
        with self._lock:
            self._abandoned = True
            self._chunks.clear()
            self._buffered = 0
            self._wake_writer()

    def _wake_writer(self) -> None:
        # Called with the lock held, from the reader thread: the loop's future is resolved on the loop.
        room = self._room
        if room is not None and (self._abandoned or self._buffered < self._max):
            self._room = None
            self._loop.call_soon_threadsafe(_resolve, room)
