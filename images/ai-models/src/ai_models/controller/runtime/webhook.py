"""The admission webhook's HTTPS listener: POST an AdmissionReview to `path`, get one back.

Bounded like the probes (threads, socket timeout, handshake in the connection's thread) and by
body: a review larger than `max_body_bytes` (the API server caps objects at 1.5 MiB; a review
carries the object and the old one) is refused with 413 before it is read. The handler's own
failure answers a refusal the API server shows the user, never a traceback; which workloads the
API server sends here at all is the webhook configuration's business (only annotated ones).
"""

from __future__ import annotations

import http.server
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from ai_models.adapters.http_server import BoundedHTTPServer, bound_address
from ai_models.controller.runtime.admission_review import Admission, ReviewError, answer, parse_review

log = logging.getLogger(__name__)

Admit = Callable[[Mapping[str, Any]], Admission]
DEFAULT_MAX_BODY_BYTES: Final = 8 * 1024 * 1024
DEFAULT_TIMEOUT_SECONDS: Final = 10.0
DEFAULT_MAX_HANDLERS: Final = 32
HANDLER_FAILED: Final = (
    "the ai-models controller could not process this workload's model annotations; an administrator "
    "finds the cause in the controller's log"
)


class _Handler(http.server.BaseHTTPRequestHandler):
    admit: Admit
    observe_duration: Callable[[float], None]
    path_served: str
    max_body: int
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        if self.path.partition("?")[0] != self.path_served:
            self._send(404, {"message": "not found"})
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._send(411, {"message": "a Content-Length is required"})
            return
        if int(length) > self.max_body:
            self._send(413, {"message": f"an AdmissionReview is at most {self.max_body} bytes"})
            return
        body = self.rfile.read(int(length))
        started = time.monotonic()
        try:
            self._review(body)
        finally:
            self.observe_duration(time.monotonic() - started)

    def _review(self, body: bytes) -> None:
        try:
            request = parse_review(body)
        except ReviewError as error:
            self._send(400, {"message": str(error)})
            return
        try:
            admission = self.admit(request)
        except Exception:
            log.exception(
                "admission failed",
                extra={
                    "kind": (request.get("kind") or {}).get("kind"),
                    "namespace": request.get("namespace"),
                    "object": request.get("name"),
                },
            )
            admission = Admission.refuse(HANDLER_FAILED, code=500)
        self._send(200, answer(str(request["uid"]), admission))

    def _send(self, code: int, document: Mapping[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return  # the admission outcome is logged by the handler, with the object


def tls_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class WebhookServer:
    def __init__(
        self,
        *,
        admit: Admit,
        address: str,
        port: int,
        cert_file: Path,
        key_file: Path,
        path: str,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_handlers: int = DEFAULT_MAX_HANDLERS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        observe_duration: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        """`observe_duration` gets the seconds each AdmissionReview took, from its body read to
        its answer (the admission duration histogram)."""
        handler = type(
            "WebhookHandler",
            (_Handler,),
            {
                "admit": staticmethod(admit),
                "observe_duration": staticmethod(observe_duration),
                "path_served": path,
                "max_body": max_body_bytes,
                "timeout": timeout_seconds,
            },
        )
        self._server = BoundedHTTPServer(
            (address, port),
            handler,
            max_handlers=max_handlers,
            name="webhook",
            tls=tls_context(cert_file, key_file),
            handshake_timeout=timeout_seconds,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> WebhookServer:
        self._thread.start()
        log.info(
            "serving the admission webhook", extra={"address": bound_address(self._server.server_address)}
        )
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
