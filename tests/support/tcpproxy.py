"""A TCP forwarder between a module process and a local peer, to take the peer away and bring it
back (a network partition) without stopping the peer other tests share.

    with TcpProxy("127.0.0.1", moto_port) as proxy:
        env["AI_MODELS_S3_ENDPOINT"] = proxy.url("http")
        proxy.block()     # new and open connections are cut: the store is unreachable
        proxy.unblock()
        proxy.rate = 1.5 * 2**20   # answers at most 1.5 MiB/s per connection (None: full speed)
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType


class TcpProxy:
    """`rate`: bytes a second the peer's answers may reach the client at, on each connection (None:
    full speed); it may change at any time, so a copy reading through the proxy can be caught midway."""

    def __init__(self, target_host: str, target_port: int, *, rate: float | None = None) -> None:
        self.rate = rate
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._blocked = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def url(self, scheme: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def block(self) -> None:
        """Refuse new connections and cut the open ones."""
        self._blocked.set()
        with self._lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
            self._open.clear()

    def unblock(self) -> None:
        self._blocked.clear()

    def stop(self) -> None:
        self._stopped.set()
        self.block()
        # Closing a listening socket does not wake a thread blocked in accept(); a connection does.
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._blocked.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for source, sink, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(source, sink, answers), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while True:
                data = source.recv(16 * 1024 if answers and self.rate else 65536)
                if not data:
                    break
                sink.sendall(data)
                rate = self.rate
                if answers and rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)
