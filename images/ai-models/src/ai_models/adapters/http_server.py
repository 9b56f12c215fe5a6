"""Small HTTP listeners of the module's processes (probes, the admission webhook, the node
plugin's /healthz): one thread per connection, at most `max_handlers` of them, each with a socket
timeout; optionally TLS.

A connection past the bound is closed at once rather than given a thread, and a client that
connects and says nothing (or never finishes a TLS handshake) holds its thread only until the
timeout: the handshake runs in the connection's thread, never in the accept loop.
"""

from __future__ import annotations

import http.server
import logging
import socket
import ssl
import threading
from typing import Any, Self

log = logging.getLogger(__name__)


class BoundedHTTPServer(http.server.HTTPServer):
    # socketserver's default of 5 drops connections in a burst, which then retry seconds later.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[http.server.BaseHTTPRequestHandler],
        *,
        max_handlers: int,
        name: str,
        tls: ssl.SSLContext | None = None,
        handshake_timeout: float = 5.0,
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_handlers)
        self._name = name
        self._tls = tls
        self._handshake_timeout = handshake_timeout

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.debug("connection refused: every handler is busy", extra={"listener": self._name})
            self.shutdown_request(request)
            return
        try:
            threading.Thread(
                target=self._handle, args=(request, client_address), name=self._name, daemon=True
            ).start()
        except BaseException:
            self._slots.release()
            self.shutdown_request(request)
            raise

    def _handle(self, request: socket.socket, client_address: Any) -> None:
        connection: socket.socket = request
        try:
            if self._tls is not None:
                request.settimeout(self._handshake_timeout)
                connection = self._tls.wrap_socket(request, server_side=True)
            self.finish_request(connection, client_address)
        except Exception:
            self.handle_error(connection, client_address)
        finally:
            self.shutdown_request(connection)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up, timed out or failed its handshake is no news; socketserver would
        # print a traceback.
        log.debug(
            "connection failed", exc_info=True, extra={"listener": self._name, "client": client_address}
        )


class ServedInBackground:
    """A `BoundedHTTPServer` answering on a daemon thread: `start()` logs where (on the owner's
    logger, so the line carries the component's name), `stop()` closes it."""

    def __init__(self, server: BoundedHTTPServer, *, what: str, logger: logging.Logger) -> None:
        self._server = server
        self._what = what
        self._log = logger
        self._thread = threading.Thread(target=server.serve_forever, name=what, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Self:
        self._thread.start()
        self._log.info(f"serving {self._what}", extra={"address": bound_address(self._server.server_address)})
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def bound_address(bound: Any) -> str:
    host, port = bound[0], bound[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
