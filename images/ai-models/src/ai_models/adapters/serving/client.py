"""The serving API as the materializer reads it: one kept-alive HTTP(S) connection, the delivery
token as a bearer token, a timeout on every connect and every read, and each answer sorted into
what a retry may fix (`Momentary`) and what it cannot (`Refused`).

The standard library's `http.client` on purpose: its responses fill a caller's buffer
(`readinto`), so a file streams to disk through one reused buffer, and nothing else is needed for
one connection to one server. A refusal names the status and what it means for this Job; the
API's own problem text goes to the log only (never into the outcome the controller may show).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import ssl
import urllib.parse
from collections.abc import Mapping
from typing import Final, NoReturn

from ai_models.domain.models.reference import ModelKey
from ai_models.names import SERVING_API_PREFIX, ModelKind

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS: Final = 10.0
READ_TIMEOUT_SECONDS: Final = 60.0
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
MAX_PROBLEM_BYTES: Final = 16 * 1024
MAX_RETRY_AFTER_SECONDS: Final = 60.0
# What each refusal means for a materialize Job: its cause and its fix, without the API's words.
JOB_REFUSALS: Final[Mapping[int, str]] = {
    401: "the delivery token was not accepted (expired, or signed with a key rotated since); the "
    "controller issues a new token with the next materialize Job",
    403: "the delivery token does not grant it (the object was published again since the Job was "
    "made); the controller starts a Job for the new artifact",
    404: "it does not exist (the object was deleted, or the artifact has no such file)",
    409: "the object is not Ready; delivery waits until it is",
}


class Momentary(Exception):
    """The API or the network failed for now: a retry may succeed. `retry_after` is the API's wait."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Refused(Exception):
    """The API answered no (or cannot be trusted), for a reason a retry of this Job does not change;
    `retryable`: a new Job (a new token, a new CA bundle) may succeed."""

    def __init__(self, message: str, *, status: int, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status in (401, 403) if retryable is None else retryable


def object_path(ref: ModelKey) -> str:
    name = urllib.parse.quote(ref.name, safe="")
    if ref.kind is ModelKind.MODEL:
        return f"{SERVING_API_PREFIX}/models/{urllib.parse.quote(ref.namespace, safe='')}/{name}"
    return f"{SERVING_API_PREFIX}/clustermodels/{name}"


@dataclasses.dataclass(frozen=True)
class FileAnswer:
    """An open file answer: `start` is where its bytes begin (0 for a whole file)."""

    response: http.client.HTTPResponse
    start: int
    length: int


class ServingClient:
    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        ca_bundle: str | None = None,
        ca_pem: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        reader: str = "the Job",
        refusals: Mapping[int, str] = JOB_REFUSALS,
    ) -> None:
        """`reader` names the caller in messages, `refusals` says what each refused status means
        for it (cause and fix); `ca_bundle` (a file) or `ca_pem` (its text) is the only CA an
        https server's certificate is verified with."""
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}
        self._context = ssl.create_default_context(cafile=ca_bundle, cadata=ca_pem) if self._https else None
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._connection: http.client.HTTPConnection | None = None
        self.where = f"{url.scheme}://{url.netloc}"
        self._reader = reader
        self._refusals = refusals

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def manifest(self, ref: ModelKey) -> bytes:
        what = f"the manifest of {ref.describe()}"
        response = self._get(f"{object_path(ref)}/manifest", {}, what=what)
        try:
            if response.status != 200:
                self._refuse(response, what)
            length = _number(response.getheader("Content-Length"))
            if not 0 <= length <= MAX_MANIFEST_BYTES:
                raise Momentary(f"{what} came without a usable Content-Length ({length})")
            return self._read_all(response, length, what)
        except BaseException:
            self.close()
            raise

    def file(self, ref: ModelKey, path: str, *, start: int, sha256: str) -> FileAnswer:
        """The file from `start` (a Range request that applies only while its ETag is `sha256`:
        otherwise the whole file comes, `start` 0). The caller reads all of `response`, or
        `close()`s the client on an error."""
        what = f"file {path!r} of {ref.describe()}"
        headers = {"Range": f"bytes={start}-", "If-Range": f'"{sha256}"'} if start else {}
        response = self._get(f"{object_path(ref)}/files/{urllib.parse.quote(path)}", headers, what=what)
        try:
            if response.status == 200:
                length = _number(response.getheader("Content-Length"))
                if length < 0:
                    raise Momentary(f"{what} came without a usable Content-Length")
                return FileAnswer(response=response, start=0, length=length)
            if response.status == 206:
                first, _, rest = (
                    (response.getheader("Content-Range") or "").removeprefix("bytes ").partition("-")
                )
                last = _number(rest.partition("/")[0])
                if _number(first) != start or last < start:
                    raise Momentary(f"{what} was answered with another range than bytes={start}-")
                return FileAnswer(response=response, start=start, length=last - start + 1)
            self._refuse(response, what)
        except BaseException:
            self.close()
            raise

    def _get(self, path: str, headers: dict[str, str], *, what: str) -> http.client.HTTPResponse:
        try:
            connection = self._connection or self._connect()
            self._connection = connection
            connection.request("GET", self._prefix + path, headers={**self._headers, **headers})
            return connection.getresponse()
        except ssl.SSLCertVerificationError as error:
            self.close()
            raise Refused(
                f"the serving API at {self.where} presents a certificate {self._reader} does not trust "
                f"({error.verify_message}); the CA bundle of the request must be the module CA",
                status=0,
                retryable=True,
            ) from error
        except (OSError, http.client.HTTPException) as error:
            self.close()
            raise Momentary(
                f"cannot read {what} from {self.where}: {type(error).__name__}: {error}"
            ) from error

    def _connect(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self._https:
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._connect_timeout, context=self._context
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._connect_timeout)
        connection.connect()
        # From here on the timeout bounds each wait for the API's next bytes.
        assert connection.sock is not None
        connection.sock.settimeout(self._read_timeout)
        return connection

    def _read_all(self, response: http.client.HTTPResponse, length: int, what: str) -> bytes:
        try:
            body = response.read(length)
        except (OSError, http.client.HTTPException) as error:
            raise Momentary(f"{what} was cut off: {type(error).__name__}") from error
        if len(body) != length:
            raise Momentary(f"{what} was cut off after {len(body)} of {length} bytes")
        return body

    def _refuse(self, response: http.client.HTTPResponse, what: str) -> NoReturn:
        status = response.status
        detail = _problem_detail(response)
        logger.warning(
            "the serving API refused a request", extra={"what": what, "status": status, "detail": detail}
        )
        if status == 429 or status >= 500:
            retry_after = response.getheader("Retry-After")
            wait = float(retry_after) if retry_after and retry_after.isdigit() else None
            raise Momentary(
                f"the serving API answered {status} for {what}",
                retry_after=min(wait, MAX_RETRY_AFTER_SECONDS) if wait is not None else None,
            )
        meaning = self._refusals.get(
            status, f"the request was refused (the log of {self._reader} has the API's answer)"
        )
        raise Refused(f"the serving API refused {what} with {status}: {meaning}", status=status)


def _number(text: str | None) -> int:
    """A header's decimal number; -1 for anything else."""
    return int(text) if text and text.isascii() and text.isdigit() else -1


def _problem_detail(response: http.client.HTTPResponse) -> str:
    """The problem document's `detail`, for the log; the body is read within a bound."""
    try:
        body = response.read(MAX_PROBLEM_BYTES)
        detail = json.loads(body).get("detail")
    except (TimeoutError, OSError, http.client.HTTPException, ValueError, AttributeError):
        return ""
    return str(detail)[:1000] if detail else ""
