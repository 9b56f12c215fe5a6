"""`/healthz` and `/readyz` on their own small HTTP listener, answered from process state only.

Probes never call the Kubernetes API: a slow API server must not make the kubelet restart a
healthy controller. Nor may a client that connects and says nothing: each connection has a socket
timeout, and at most `max_handlers` are handled at once; one past them is closed at once rather
than given a thread (kubelet probes are one short request each, so the bound only ever bites a
flood).

Each listener logs the address it bound ("serving probes", "serving metrics", with `address`): a
port of 0 picks a free one, and the log line is how whoever started the process learns which.
"""

from __future__ import annotations

import http.server
import logging
import threading
from typing import Any, Final

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from ai_models.adapters.http_server import BoundedHTTPServer, ServedInBackground, bound_address

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS: Final = 5.0
DEFAULT_MAX_HANDLERS: Final = 16


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


class ProbeServer(ServedInBackground):
    def __init__(
        self,
        *,
        state: ProbeState,
        address: str,
        port: int,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_handlers: int = DEFAULT_MAX_HANDLERS,
    ) -> None:
        # `timeout` is the handler's socket timeout: a request that does not arrive in time ends it.
        handler = type("ProbeHandler", (_Handler,), {"state": state, "timeout": timeout_seconds})
        server = BoundedHTTPServer((address, port), handler, max_handlers=max_handlers, name="probe")
        super().__init__(server, what="probes", logger=log)


def serve_metrics(*, address: str, port: int, registry: CollectorRegistry = REGISTRY) -> int:
    """`/metrics` of `registry` on its own listener (port 0 picks a free one); logs the address it
    bound and returns the port."""
    server, _thread = start_http_server(port, addr=address, registry=registry)
    bound = int(server.server_port)
    log.info("serving metrics", extra={"address": bound_address((address, bound)), "path": "/metrics"})
    return bound
