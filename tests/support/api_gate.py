"""A gate in front of the API emulator: a TCP proxy a test can close, stall and open again.

The module's processes reach the emulator through the gate's kubeconfig. `close()` stops listening
and resets every open connection (an API server that is not up yet, or restarting: connections are
refused); `stall()` accepts connections but answers nothing (an overloaded or partitioned API
server); `open()` forwards again. TLS passes through untouched: the emulator's certificate names
127.0.0.1, whatever the port.

The gate's port stays its own while it is closed: a socket bound with SO_REUSEPORT (port 0, never
listening) holds it from construction to exit, and each listener joins it on the same port. A
connection while no listener exists is refused, as by a host whose API server is down, and no other
process can take the port in between.
"""

from __future__ import annotations

import enum
import socket
import struct
import threading
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from kubeemu.authn import Identity
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from kubeemu.pytest_fixtures import RunningEmulator


class GateState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"
    STALLED = "stalled"


class ApiGate:
    def __init__(self, emulator: RunningEmulator) -> None:
        upstream = urlsplit(emulator.url)
        self.emulator = emulator
        self.upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self._holder = _reusable_socket()
        self._holder.bind(("127.0.0.1", 0))
        self.port = int(self._holder.getsockname()[1])
        self.url = f"{upstream.scheme}://127.0.0.1:{self.port}"
        self.state = GateState.CLOSED
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self.accepted = 0  # connections the gate took (in any state but CLOSED)

    def kubeconfig(self, identity: Identity, path: Path) -> Path:
        """A kubeconfig that reaches the emulator through the gate as `identity`."""
        document = kubeconfig_document(self.url, [("gate", identity)], ca_pem=self.emulator.ca_pem)
        return write_kubeconfig(path, document)

    # ----- states ------------------------------------------------------------------------------------

    def open(self) -> None:
        self._listen(GateState.OPEN)

    def stall(self) -> None:
        """Accept and hold every new connection without a byte in either direction; connections
        already forwarding are reset, as when the API server stops answering mid-request."""
        self._reset_all()
        self._listen(GateState.STALLED)

    def close(self) -> None:
        with self._lock:
            self.state = GateState.CLOSED
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self._reset_all()

    # ----- plumbing ----------------------------------------------------------------------------------

    def _listen(self, state: GateState) -> None:
        with self._lock:
            self.state = state
            if self._listener is not None:
                return
            listener = _reusable_socket()
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            listener.settimeout(0.1)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="api-gate", daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            with self._lock:
                if self._listener is not listener:
                    return
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._sockets.add(client)
                forward = self.state is GateState.OPEN
            if forward:
                threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            self._reset(client)
            return
        server.settimeout(None)
        with self._lock:
            self._sockets.add(server)
        threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
        self._pipe(client, server)

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                self._reset(sock)

    def _reset(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        try:
            # Linger 0: close with a RST, as a vanished server or proxy would; the shutdown wakes
            # the thread that may be blocked reading this socket.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()

    def _reset_all(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            self._reset(sock)

    def __enter__(self) -> ApiGate:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
        self._holder.close()


def _reusable_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock
