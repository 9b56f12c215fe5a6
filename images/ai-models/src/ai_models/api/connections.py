"""uvicorn's HTTP/1.1 protocol with the limits a public listener needs and h11 does not have.

- A header deadline: a connection that has not sent a complete request head within
  `header_timeout_seconds` of connecting, or of the first byte of its next request, is answered
  408 and closed (h11 waits for a head forever; uvicorn's keep-alive timer runs only between
  requests that sent nothing yet).
- A connection cap: past `max_connections` open connections a new one is answered 503 with
  `Retry-After` and closed before anything of it is read.
- A write-stall watchdog: a connection with response bytes waiting that makes no progress sending
  them for `write_stall_timeout_seconds` is aborted (closing it would wait for the very bytes that
  do not drain). Progress is bytes the peer acknowledges (the transport's and the kernel's queues
  both count), so a slow reader that keeps reading is never cut.
- A small write buffer (`WRITE_BUFFER_HIGH_BYTES`): responses that stream pause as soon as a
  piece is buffered, so what a reader that does not read costs the process is about one piece.

Requests h11 cannot parse are answered 400 in the problem shape too (uvicorn answers text). The
answers it writes itself precede any request (or replace one that never arrived), so they are
raw bytes in the problem shape, not ASGI responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import fcntl
import http
import logging
import socket
import struct
import termios
from collections.abc import Callable
from typing import Any, ClassVar, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ai_models.api.models import ProblemType
from ai_models.api.problems import PROBLEM_MEDIA_TYPE, ApiProblem

log = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_BYTES: Final = 16 * 1024
RETRY_AFTER_SECONDS: Final = 5
# How often a connection with bytes waiting is looked at, as a fraction of the stall timeout.
_TICKS_PER_TIMEOUT: Final = 4


class ClosedBecause(enum.StrEnum):
    """Why the api closed a connection itself (the `reason` of `connections_closed_total`)."""

    TOO_MANY_CONNECTIONS = "TooManyConnections"
    HEADER_TIMEOUT = "HeaderTimeout"
    NOT_HTTP = "NotHttp"
    WRITE_STALLED = "WriteStalled"


def _not_counted(reason: ClosedBecause) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_seconds: float
    write_stall_timeout_seconds: float
    max_connections: int
    # Called on the event loop each time a limit closes a connection: the process counts them.
    on_closed: Callable[[ClosedBecause], None] = _not_counted


def _raw_problem(problem: ApiProblem) -> bytes:
    body = problem.problem().model_dump_json().encode()
    headers = {
        "Content-Type": PROBLEM_MEDIA_TYPE,
        "Content-Length": str(len(body)),
        "Connection": "close",
        **problem.headers,
    }
    head = f"HTTP/1.1 {problem.status} {http.HTTPStatus(problem.status).phrase}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (head + "\r\n").encode("ascii") + body


_HEAD_TIMED_OUT: Final = _raw_problem(
    ApiProblem(
        ProblemType.REQUEST_TIMEOUT,
        408,
        "the request's headers did not arrive in time; send the whole request head at once",
    )
)
_UNPARSEABLE: Final = _raw_problem(
    ApiProblem(
        ProblemType.INVALID_PARAMETER,
        400,
        "the request is not valid HTTP/1.1 (its request line or headers cannot be parsed)",
    )
)
_TOO_MANY_CONNECTIONS: Final = _raw_problem(
    ApiProblem(
        ProblemType.REPLICA_BUSY,
        503,
        "this api replica has as many open connections as it accepts; retry after the time in "
        "Retry-After, and reuse connections rather than opening new ones",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
)


class GuardedH11Protocol(H11Protocol):
    """One connection; `guarded_protocol()` makes the class a listener uses, with its limits."""

    limits: ClassVar[ConnectionLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._written = 0
        self._last_sent = 0
        self._last_progress = 0.0
        self._refused = False

    # Connection lifetime.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES)
        write = transport.write

        def counted(data: bytes | bytearray | memoryview) -> None:
            self._written += len(data)
            write(data)

        # Bytes sent = bytes written - bytes still buffered: the watchdog's measure of progress.
        transport.write = counted  # type: ignore[method-assign]
        if len(self.connections) > self.limits.max_connections:
            self._refused = True
            log.debug("connection refused: too many open connections", extra={"client": self.client})
            self.limits.on_closed(ClosedBecause.TOO_MANY_CONNECTIONS)
            transport.write(_TOO_MANY_CONNECTIONS)
            transport.close()
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)

    # Header deadline.

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self.conn.their_state is h11.IDLE and self._head_timer is None:
            self._arm_head_timer()  # the first byte of another request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_head_timer()

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.header_timeout_seconds, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        log.debug("connection closed: its request head did not arrive in time", extra={"client": self.client})
        self.limits.on_closed(ClosedBecause.HEADER_TIMEOUT)
        self.transport.write(_HEAD_TIMED_OUT)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers text/plain; every answer of the api is in the problem shape.
        log.debug("connection closed: not HTTP", extra={"client": self.client, "error": msg})
        self.limits.on_closed(ClosedBecause.NOT_HTTP)
        self.transport.write(_UNPARSEABLE)
        self.transport.close()

    # Write-stall watchdog.

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_writes()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.get_write_buffer_size() > 0:
            self._watch_writes()  # the last bytes of a response must leave too

    def _sent(self) -> int:
        """Bytes the peer has acknowledged: written, less what the transport and the kernel still hold.

        The kernel's send queue counts too: it can hold megabytes, and while a slow reader drains
        it the transport's own buffer does not move at all.
        """
        return self._written - self.transport.get_write_buffer_size() - self._kernel_unacknowledged()

    def _kernel_unacknowledged(self) -> int:
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return 0
        try:
            queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
        except OSError:
            return 0
        return int(struct.unpack("i", queued)[0])

    def _watch_writes(self) -> None:
        if self._stall_timer is None:
            self._last_sent = self._sent()
            self._last_progress = self.loop.time()
            self._schedule_stall_check()

    def _schedule_stall_check(self) -> None:
        tick = self.limits.write_stall_timeout_seconds / _TICKS_PER_TIMEOUT
        self._stall_timer = self.loop.call_later(tick, self._check_stall)

    def _check_stall(self) -> None:
        self._stall_timer = None
        if self.transport.get_write_buffer_size() == 0:
            return  # nothing waits; pause_writing arms the watchdog again
        now = self.loop.time()
        sent = self._sent()
        if sent > self._last_sent:
            self._last_sent = sent
            self._last_progress = now
        elif now - self._last_progress >= self.limits.write_stall_timeout_seconds:
            log.debug("connection dropped: its reader stopped reading", extra={"client": self.client})
            self.limits.on_closed(ClosedBecause.WRITE_STALLED)
            self._reset()
            return
        self._schedule_stall_check()

    def _reset(self) -> None:
        # abort(), not close(): close() would wait for the buffered bytes to drain. And a linger of
        # zero, so the kernel answers with a reset too rather than keeping the socket and its send
        # queue behind a FIN the reader's closed window never lets out.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class for `uvicorn.Config(http=...)`: each listener gets its own limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
