"""`GET /healthz` of the node plugin: 200 once the gRPC server listens and the cache root is usable;
`GET /metrics`: the plugin's registry in the Prometheus text format.

Answered from process state only (no Kubernetes API call, no gRPC round trip): the startup,
liveness and readiness probes all read it, and a slow API server must not restart a healthy
plugin whose bind mounts serve pods. The metrics carry counts only, nothing a probe could not
already learn about the node (D167).
"""

from __future__ import annotations

import http.server
import logging
from collections.abc import Callable
from typing import Any, Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ai_models.adapters.http_server import BoundedHTTPServer, ServedInBackground

log = logging.getLogger(__name__)

TIMEOUT_SECONDS: Final = 5.0
MAX_HANDLERS: Final = 8


class _Handler(http.server.BaseHTTPRequestHandler):
    healthy: Callable[[], bool]
    registry: CollectorRegistry

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._answer(200, generate_latest(type(self).registry), content_type=CONTENT_TYPE_LATEST)
        elif self.path != "/healthz":
            self._answer(404, b"not found\n")
        elif type(self).healthy():
            self._answer(200, b"ok\n")
        else:
            self._answer(503, b"the gRPC server is not listening or the cache root is not usable\n")

    def _answer(self, code: int, body: bytes, *, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # a probe every few seconds would drown the log


class HealthServer(ServedInBackground):
    def __init__(
        self,
        *,
        healthy: Callable[[], bool],
        address: str,
        port: int,
        registry: CollectorRegistry | None = None,
    ) -> None:
        handler = type(
            "HealthHandler",
            (_Handler,),
            {
                "healthy": staticmethod(healthy),
                "registry": registry or CollectorRegistry(),
                "timeout": TIMEOUT_SECONDS,
            },
        )
        server = BoundedHTTPServer((address, port), handler, max_handlers=MAX_HANDLERS, name="health")
        super().__init__(server, what="/healthz", logger=log)
