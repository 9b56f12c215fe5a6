"""`/healthz` and `/readyz` on their own small HTTP listener, answered from process state only.

Probes never call the Kubernetes API: a slow API server must not make the kubelet restart a
healthy controller.
"""

from __future__ import annotations

import http.server
import threading
from typing import Any


class ProbeState:
    """What the probes report; flipped by the process as it starts and stops."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._stopping = threading.Event()

    def mark_ready(self) -> None:
        self._ready.set()

    def mark_stopping(self) -> None:
        self._stopping.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and not self._stopping.is_set()


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ProbeState

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._answer(200, b"ok\n")
        elif self.path == "/readyz":
            self._answer(200, b"ready\n") if self.state.ready else self._answer(503, b"not ready\n")
        else:
            self._answer(404, b"not found\n")

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        # Probes every few seconds would drown the log.
        return


class ProbeServer:
    def __init__(self, *, state: ProbeState, address: str, port: int) -> None:
        handler = type("ProbeHandler", (_Handler,), {"state": state})
        self._server = http.server.ThreadingHTTPServer((address, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="probes", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> ProbeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
