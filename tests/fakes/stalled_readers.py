"""Hostile HTTP clients for a server's connection handling: readers that ask for a file and never
read it, requests whose headers never end, and connections that say nothing at all.

Each is a set of real TCP sockets to a local address. A reader's small `SO_RCVBUF`, set before it
connects, keeps the window it advertises small, so what the server writes piles up on the server's
side, as it does behind a client that stopped reading. Nothing here reads a byte unless asked:
`status_lines()` peeks (`MSG_PEEK`) without consuming, and `dropped()` asks the kernel for the
connection's TCP state, so checking a reader does not unstall it.

    with stalled_readers("127.0.0.1", port, path=url, headers=auth, count=300) as readers:
        eventually(lambda: readers.answered() == 300, what="every reader got its headers")
        ...
        eventually(lambda: readers.dropped() == 300, what="the server dropped them")
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import struct
from collections.abc import Mapping
from types import TracebackType

TCP_ESTABLISHED = 1
DEFAULT_RECEIVE_BUFFER = 4096


@dataclasses.dataclass
class HostileConnections:
    """Open sockets that misbehave; `close()` (or leaving the `with`) closes every one."""

    sockets: list[socket.socket] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sockets)

    def status_lines(self) -> list[bytes | None]:
        """Each socket's first response line as received so far (None: nothing yet), unread."""
        lines: list[bytes | None] = []
        for sock in self.sockets:
            try:
                head = sock.recv(256, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                lines.append(None)
                continue
            except OSError:
                lines.append(b"")
                continue
            lines.append(head.split(b"\r\n", 1)[0] if b"\r\n" in head else None)
        return lines

    def answered(self, status: int | None = None) -> int:
        """How many got a status line (with `status`, only that status)."""
        wanted = f" {status} ".encode() if status is not None else b"HTTP/1."
        return sum(1 for line in self.status_lines() if line and wanted in line + b" ")

    def dropped(self) -> int:
        """How many the server closed or reset (their TCP state is no longer ESTABLISHED)."""
        return sum(1 for sock in self.sockets if _tcp_state(sock) != TCP_ESTABLISHED)

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self.sockets.clear()

    def __enter__(self) -> HostileConnections:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _tcp_state(sock: socket.socket) -> int:
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
    except OSError:
        return 0
    return int(struct.unpack_from("B", info)[0])


def _connect(host: str, port: int, *, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        # Before connect: the window scale is agreed in the handshake.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(10)
    sock.connect((host, port))
    return sock


def _request(path: str, headers: Mapping[str, str], host: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def stalled_readers(
    host: str,
    port: int,
    *,
    path: str,
    count: int,
    headers: Mapping[str, str] | None = None,
    receive_buffer: int = DEFAULT_RECEIVE_BUFFER,
) -> HostileConnections:
    """`count` connections that each send one GET for `path` and then never read."""
    opened = HostileConnections()
    try:
        for _ in range(count):
            sock = _connect(host, port, receive_buffer=receive_buffer)
            opened.sockets.append(sock)
            sock.sendall(_request(path, headers or {}, host))
    except BaseException:
        opened.close()
        raise
    return opened


def half_sent_requests(host: str, port: int, *, count: int, path: str = "/healthz") -> HostileConnections:
    """`count` connections whose request headers start and never end."""
    opened = HostileConnections()
    try:
        for _ in range(count):
            sock = _connect(host, port)
            opened.sockets.append(sock)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Never-Ends: ".encode())
    except BaseException:
        opened.close()
        raise
    return opened


def idle_connections(host: str, port: int, *, count: int) -> HostileConnections:
    """`count` connections that send nothing at all."""
    opened = HostileConnections()
    try:
        for _ in range(count):
            opened.sockets.append(_connect(host, port))
    except BaseException:
        opened.close()
        raise
    return opened
