"""Upload clients for tests: hostile ones over raw sockets (they trickle, lie about
Content-Length, disconnect), and the controller's side of an upload (`offer`: a URL in status).

Each raw client speaks just enough HTTP/1.1 to start a PUT (request head, then body bytes as the
test says) and reads whatever answer comes; a test starts them, lets them misbehave and stops them
(`close`), so nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import socket
import threading
from collections.abc import Mapping
from typing import Any

from ai_models.api.upload.models import UPLOAD_PATH
from ai_models.domain.publication.upload_token import issue
from ai_models.domain.storage.ledger import Owner

IN_CLUSTER = "http://ai-models-api.d8-ai-models.svc"


def upload_path(token: str) -> str:
    return UPLOAD_PATH.format(token=token)


def offer(cluster: Any, owner: Owner, *, key: bytes, hours: float = 1) -> str:
    """Put a new upload URL into the object's status as the controller does (it replaces the old
    one); `cluster` is the api tests' ApiCluster. The URL's token."""
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=hours)
    token = issue(owner, expires_at=expires, key=key)
    cluster.set_status(
        owner,
        {
            "phase": "WaitForUpload",
            "upload": {
                "expiresAt": expires.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
                "inCluster": f"{IN_CLUSTER}{upload_path(token)}",
            },
        },
    )
    return token


@dataclasses.dataclass
class Answer:
    status: int | None  # None: the connection closed without a status line
    raw: bytes


class RawUpload:
    """One PUT on its own connection; the body is sent only when the test says so."""

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        *,
        content_length: int | None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60,
    ) -> None:
        self.sent = 0
        self._connection = socket.create_connection((host, port), timeout=timeout)
        lines = [f"PUT {path} HTTP/1.1", f"Host: {host}:{port}"]
        if content_length is not None:
            lines.append(f"Content-Length: {content_length}")
        lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
        self._connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send(self, data: bytes) -> bool:
        """Send `data`; False once the server has closed the connection."""
        try:
            self._connection.sendall(data)
        except OSError:
            return False
        self.sent += len(data)
        return True

    def answer(self, *, timeout: float = 60) -> Answer:
        """Read until the server closes or a complete head arrives: its status code."""
        self._connection.settimeout(timeout)
        raw = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in raw:
                chunk = self._connection.recv(65536)
                if not chunk:
                    break
                raw += chunk
            head, _, rest = raw.partition(b"\r\n\r\n")
            length = _content_length(head)
            while length is not None and len(rest) < length:
                chunk = self._connection.recv(65536)
                if not chunk:
                    break
                rest += chunk
                raw += chunk
        first = raw.split(b"\r\n", 1)[0].split()
        status = int(first[1]) if len(first) >= 2 and first[1].isdigit() else None
        return Answer(status=status, raw=raw)

    def close(self) -> None:
        """Go away: close the connection whatever was sent."""
        with contextlib.suppress(OSError):
            self._connection.close()


class Trickler:
    """Announces `content_length`, sends `head` at once, then `drip` bytes every `interval` seconds
    from a thread until the server answers or closes, or `close` is called."""

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        *,
        content_length: int,
        head: bytes,
        headers: Mapping[str, str] | None = None,
        drip: bytes = b"\0",
        interval: float = 0.2,
    ) -> None:
        self.upload = RawUpload(host, port, path, content_length=content_length, headers=headers)
        self._head = head
        self._drip = drip
        self._interval = interval
        self._stop = threading.Event()
        self.stopped_by_server = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trickler", daemon=True)

    def start(self) -> Trickler:
        self._thread.start()
        return self

    def _run(self) -> None:
        if not self.upload.send(self._head):
            self.stopped_by_server.set()
            return
        while not self._stop.wait(self._interval):
            if not self.upload.send(self._drip):
                self.stopped_by_server.set()
                return

    def answer(self, *, timeout: float = 60) -> Answer:
        return self.upload.answer(timeout=timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.upload.close()


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    return None
