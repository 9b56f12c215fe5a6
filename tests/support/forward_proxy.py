"""A real HTTP forward proxy on 127.0.0.1 that counts what it carried: what a module process finds
in HTTP_PROXY / HTTPS_PROXY on a cluster with an egress proxy.

It serves both forms a client uses: an absolute-URI request (`GET http://host:port/path`, plain
HTTP through the proxy), answered with `Connection: close` so every request is one connection and
one count; and `CONNECT host:port` (HTTPS through the proxy), a tunnel whose inside it cannot see.

`hosts` are names only the proxy resolves (to an address): a URL on such a name works through
the proxy and nowhere else, as a public Hub does on a cluster whose egress is the proxy.

    with ForwardProxy(hosts={"hub.example.test": "127.0.0.1"}) as proxy:
        env["HTTPS_PROXY"] = env["HTTP_PROXY"] = proxy.url
        ...
        assert proxy.targets() == {"hub.example.test:8080"}
        assert proxy.count("hub.example.test:8080") == 3
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import urllib.parse
from collections.abc import Mapping
from types import TracebackType

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 64 * 1024
# Hop-by-hop headers (RFC 9110 7.6.1) this proxy replaces or drops on the way through.
_HOP_BY_HOP = frozenset({b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization"})


@dataclasses.dataclass(frozen=True)
class Carried:
    """One request the proxy carried: its method and `host:port`, and the path for plain HTTP."""

    method: str
    target: str
    path: str


class ForwardProxy:
    def __init__(self, *, hosts: Mapping[str, str] | None = None) -> None:
        self._hosts = dict(hosts or {})
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._carried: list[Carried] = []
        self._open: set[socket.socket] = set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="forward-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def carried(self) -> list[Carried]:
        with self._lock:
            return list(self._carried)

    def targets(self) -> set[str]:
        return {item.target for item in self.carried()}

    def count(self, target: str) -> int:
        return sum(1 for item in self.carried() if item.target == target)

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stopped.set()
        # Closing a listening socket does not wake a thread blocked in accept(); a connection does.
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname(), timeout=1):
            pass
        self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._stopped.is_set():
                client.close()
                return
            threading.Thread(
                target=self._serve, args=(client,), name="forward-proxy-conn", daemon=True
            ).start()

    def _track(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._open.update(sockets)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(client)
            request_line, _, header_block = head.partition(b"\r\n")
            method, target, version = request_line.decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                upstream = self._connect(target)
                self._record(Carried(method, target, ""))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                _pipe_both(client, upstream)
                return
            url = urllib.parse.urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                return
            address = f"{url.hostname}:{url.port or 80}"
            path = urllib.parse.urlunsplit(("", "", url.path or "/", url.query, ""))
            upstream = self._connect(address)
            self._record(Carried(method, address, path))
            upstream.sendall(
                f"{method} {path} {version}\r\n".encode("latin-1")
                + _rewrite(header_block)
                + b"Connection: close\r\n\r\n"
                + rest
            )
            # The request body (if any) flows on while the answer comes back.
            threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
            answer, body = _read_head(upstream)
            status, _, answer_headers = answer.partition(b"\r\n")
            client.sendall(status + b"\r\n" + _rewrite(answer_headers) + b"Connection: close\r\n\r\n" + body)
            _pipe(upstream, client)
        except (OSError, ValueError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    _close(sock)

    def _connect(self, address: str) -> socket.socket:
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        upstream = socket.create_connection((self._hosts.get(host, host), int(port)), timeout=10)
        upstream.settimeout(None)
        self._track(upstream)
        return upstream

    def _record(self, item: Carried) -> None:
        with self._lock:
            self._carried.append(item)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The message head (without the blank line) and the bytes read past it."""
    data = b""
    while _HEAD_END not in data:
        piece = sock.recv(65536)
        if not piece:
            raise ValueError("the peer closed before the end of the message head")
        data += piece
        if len(data) > _MAX_HEAD:
            raise ValueError("message head too long")
    head, _, rest = data.partition(_HEAD_END)
    return head, rest


def _rewrite(header_block: bytes) -> bytes:
    """The header lines without hop-by-hop ones, each ending in CRLF."""
    lines = [line for line in header_block.split(b"\r\n") if line]
    kept = [line for line in lines if line.split(b":", 1)[0].strip().lower() not in _HOP_BY_HOP]
    return b"".join(line + b"\r\n" for line in kept)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while piece := source.recv(65536):
            sink.sendall(piece)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _pipe_both(client: socket.socket, upstream: socket.socket) -> None:
    other = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    other.start()
    _pipe(client, upstream)
    other.join()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
