"""`GET /healthz` of the node plugin: 200 once the gRPC server listens and the cache root is usable.

Answered from process state only (no Kubernetes API call, no gRPC round trip): the startup,
liveness and readiness probes all read it, and a slow API server must not restart a healthy
plugin whose bind mounts serve pods.
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable
from typing import Any, Final

from ai_models.adapters.http_server import BoundedHTTPServer, bound_address

log = logging.getLogger(__name__)

TIMEOUT_SECONDS: Final = 5.0
MAX_HANDLERS: Final = 8


class _Handler(http.server.BaseHTTPRequestHandler):
    healthy: Callable[[], bool]

    def do_GET(self) -> None:
        if self.path != "/healthz":
            self._answer(404, b"not found\n")
        elif type(self).healthy():
            self._answer(200, b"ok\n")
        else:
            self._answer(503, b"the gRPC server is not listening or the cache root is not usable\n")

    def _answer(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # a probe every few seconds would drown the log


class HealthServer:
    def __init__(self, *, healthy: Callable[[], bool], address: str, port: int) -> None:
        handler = type(
            "HealthHandler", (_Handler,), {"healthy": staticmethod(healthy), "timeout": TIMEOUT_SECONDS}
        )
        self._server = BoundedHTTPServer((address, port), handler, max_handlers=MAX_HANDLERS, name="health")
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        log.info("serving /healthz", extra={"address": bound_address(self._server.server_address)})
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
