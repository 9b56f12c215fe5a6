"""The serving API's answers: the manifest and the files of a Ready object's artifact.

The artifact is the one `status.artifact.digest` names; its manifest is immutable (the digest is
its directory), so parsed manifests are kept in a small LRU and a file request costs one store
read. Files are streamed from `open_range` in constant memory, a bounded chunk at a time, and
only paths the manifest lists are served: nothing else under the artifact (or outside it) can be
reached by a crafted path.

A reader that stops reading must cost little and not for long: the next chunk is read from the
store only once the connection has taken the previous one (an empty body message waits for the
transport to be writable), so what such a reader holds is the transport's small buffer and one
chunk; `connections` drops it after the stall timeout. Downloads in flight are counted per
replica and per subject (`DownloadSlots`): over either limit a request is refused before anything
is opened, 503 or 429 with `Retry-After`.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import logging
import threading
import typing
from collections.abc import AsyncIterator, Callable, Mapping
from typing import BinaryIO, Final

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.api.auth import Subject
from ai_models.api.metrics import ApiMetrics
from ai_models.api.model_objects import ApiModels, ModelObject
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem, not_found, object_store_error, store_failed, wrong_phase
from ai_models.api.serving.delivery_tokens import digest_changed
from ai_models.api.serving.ranges import (
    ByteRange,
    RangeNotSatisfiable,
    none_match,
    quoted,
    range_applies,
    requested_range,
)
from ai_models.domain.artifacts.layout import file_key, manifest_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ManifestFormatError,
    manifest_from_json,
    manifest_to_json,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelPhase

log = logging.getLogger(__name__)

# Store reads are large (one thread-pool hop each: 4 pieces of 64 KiB instead of 4 hops doubles
# a stream's throughput); what goes to the transport at once is a piece, so a reader that stops
# reading holds one piece, and its read only until it gives the store stream back.
READ_BYTES: Final = 256 * 1024
SEND_BYTES: Final = 64 * 1024
RETRY_AFTER_SECONDS: Final = 5
# How long a reader that has not taken its last chunk keeps its store stream open.
HOLD_STREAM_SECONDS: Final = 1.0
# A ServiceAccount token bound to a pod names the pod here (TokenReview's user.extra): each pod of a
# DaemonSet sharing one ServiceAccount is a subject of its own.
POD_UID_EXTRA: Final = "authentication.kubernetes.io/pod-uid"
MANIFESTS_KEPT: Final = 64
OCTET_STREAM: Final = "application/octet-stream"
JSON: Final = "application/json"


@dataclasses.dataclass(frozen=True)
class ServedManifest:
    body: bytes
    etag: str  # the artifact digest, quoted
    files: Mapping[str, ArtifactFile]


@dataclasses.dataclass(frozen=True)
class ServingRequest:
    """The parts of an HTTP request the serving answers depend on; `subject` counts its download."""

    method: str
    range: str | None = None
    if_range: str | None = None
    if_none_match: str | None = None
    subject: str = ""
    # Admitted by a delivery token: the digest it grants and whose token it is (the object must
    # still have that digest).
    granted_digest: str | None = None
    granted_to: str = ""

    @property
    def head(self) -> bool:
        return self.method == "HEAD"


def subject_key(subject: Subject) -> str:
    """Whom a download is counted against: the user, or the pod its token is bound to."""
    pods = dict(subject.extra).get(POD_UID_EXTRA, ())
    return f"{subject.username}/{pods[0]}" if pods else subject.username


@dataclasses.dataclass(frozen=True)
class DownloadLimits:
    per_replica: int
    per_subject: int


class DownloadSlots:
    """Downloads in flight on this replica, in all and per subject; thread-safe."""

    def __init__(self, limits: DownloadLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._by_subject: dict[str, int] = {}
        self._total = 0

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._total

    def take(self, subject: str) -> Callable[[], None]:
        """A slot for `subject`, or a 429/503 problem; the returned callable frees it (once)."""
        with self._lock:
            if self._by_subject.get(subject, 0) >= self.limits.per_subject:
                raise ApiProblem(
                    ProblemType.TOO_MANY_DOWNLOADS,
                    429,
                    f"this subject already has {self.limits.per_subject} downloads in flight on this api "
                    "replica, as many as one subject may; finish or cancel one, or retry after the time in "
                    "Retry-After",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                )
            if self._total >= self.limits.per_replica:
                raise ApiProblem(
                    ProblemType.REPLICA_BUSY,
                    503,
                    f"this api replica streams {self.limits.per_replica} downloads already, as many as it "
                    "may at once; retry after the time in Retry-After",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                )
            self._by_subject[subject] = self._by_subject.get(subject, 0) + 1
            self._total += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._total -= 1
                left = self._by_subject[subject] - 1
                if left:
                    self._by_subject[subject] = left
                else:
                    del self._by_subject[subject]

        return release


class ArtifactServer:
    def __init__(
        self,
        *,
        store: ObjectStore,
        models: ApiModels,
        metrics: ApiMetrics,
        downloads: DownloadSlots | None = None,
    ) -> None:
        self._store = store
        self._models = models
        self._metrics = metrics
        self.downloads = downloads or DownloadSlots(DownloadLimits(per_replica=256, per_subject=16))
        self._manifests: collections.OrderedDict[tuple[ModelKey, str], ServedManifest] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    # Blocking: called from the request thread pool.

    def ready(self, ref: ModelKey) -> tuple[ModelObject, ServedManifest]:
        """The Ready object and its artifact's manifest; raises 404, 409 or 502 problems."""
        found = self._models.get(ref)
        if found is None:
            raise not_found(f"there is no {ref.describe()}; check the name (and namespace)")
        digest = found.digest
        if found.phase is not ModelPhase.READY or digest is None:
            raise wrong_phase(
                f"{ref.describe()} is in phase {found.phase.value}, not Ready: its files are served once it "
                "is Ready with a published artifact (see its conditions); retry then"
            )
        return found, self._manifest(found, digest)

    def _manifest(self, found: ModelObject, digest: str) -> ServedManifest:
        key = (found.ref, digest)
        with self._lock:
            cached = self._manifests.get(key)
            if cached is not None:
                self._manifests.move_to_end(key)
                return cached
        what = f"the manifest of {found.ref.describe()} (artifact {digest})"
        try:
            body = self._store.get_bytes(manifest_key(found.owner, digest))
            manifest = manifest_from_json(body)
        except ObjectNotFound as error:
            raise object_store_error(
                f"{what} is missing from the object store: the artifact is damaged; the controller "
                "reports it on the object, and publishing it again repairs it"
            ) from error
        except ManifestFormatError as error:
            raise object_store_error(f"{what} cannot be read ({error}): the artifact is damaged") from error
        except ObjectStoreError as error:
            raise store_failed(
                error, f"cannot read {what}: the object store failed (the api replica logged the cause)"
            ) from error
        # Served in today's form: the same bytes for a manifest written so, and an older one's
        # per-file `etag` becomes `storeVersion` (D146), as the contract names it.
        served = ServedManifest(
            body=manifest_to_json(manifest),
            etag=quoted(digest),
            files={item.path: item for item in manifest.files},
        )
        with self._lock:
            self._manifests[key] = served
            while len(self._manifests) > MANIFESTS_KEPT:
                self._manifests.popitem(last=False)
        return served

    def _open(
        self, found: ModelObject, digest: str, item: ArtifactFile, start: int, end: int | None
    ) -> BinaryIO:
        try:
            return _unbuffered(
                self._store.open_range(file_key(found.owner, digest, item.path), start=start, end=end)
            )
        except ObjectNotFound as error:
            raise object_store_error(
                f"file {item.path!r} of {found.ref.describe()} (artifact {digest}) is listed in the manifest "
                "but missing from the object store: the artifact is damaged; publishing it again repairs it"
            ) from error
        except ObjectStoreError as error:
            raise store_failed(
                error,
                f"cannot read file {item.path!r} of {found.ref.describe()}: the object store failed (the "
                "api replica logged the cause)",
            ) from error

    # Answers.

    def granted(self, ref: ModelKey, request: ServingRequest) -> tuple[ModelObject, ServedManifest]:
        """`ready(ref)`, and for a delivery token the object's digest checked against the granted one."""
        found, manifest = self.ready(ref)
        if request.granted_digest is not None and found.digest != request.granted_digest:
            raise digest_changed(
                ref, current=str(found.digest), granted=request.granted_digest, holder=request.granted_to
            )
        return found, manifest

    def manifest_response(self, ref: ModelKey, request: ServingRequest) -> Response:
        _found, manifest = self.granted(ref, request)
        headers = {"ETag": manifest.etag}
        if none_match(request.if_none_match, manifest.etag):
            return Response(status_code=304, headers=headers)
        if request.head:
            return Response(
                status_code=200,
                headers={**headers, "Content-Length": str(len(manifest.body))},
                media_type=JSON,
            )
        self._metrics.served_bytes.inc(len(manifest.body))
        return Response(manifest.body, status_code=200, headers=headers, media_type=JSON)

    def file_response(self, ref: ModelKey, path: str, request: ServingRequest) -> Response:
        found, manifest = self.granted(ref, request)
        item = manifest.files.get(path)
        if item is None:
            raise not_found(
                f"the artifact of {ref.describe()} has no file {path!r}; its manifest lists the files "
                f"({len(manifest.files)} of them)"
            )
        etag = quoted(item.sha256)
        headers = {"ETag": etag, "Accept-Ranges": "bytes"}
        if none_match(request.if_none_match, etag):
            return Response(status_code=304, headers=headers)
        try:
            wanted = (
                requested_range(request.range, size=item.size)
                if range_applies(request.if_range, etag)
                else None
            )
        except RangeNotSatisfiable as error:
            raise ApiProblem(
                ProblemType.RANGE_NOT_SATISFIABLE,
                416,
                f"file {path!r} of {ref.describe()} has {item.size} bytes; {error}: ask for a range "
                "within them",
                headers={"Content-Range": error.content_range},
            ) from error
        span = wanted if wanted is not None else ByteRange(start=0, end=item.size - 1)
        status = 206 if wanted is not None else 200
        if wanted is not None:
            headers["Content-Range"] = wanted.content_range(item.size)
        headers["Content-Length"] = str(span.length)
        if request.head or span.length == 0:
            return Response(status_code=status, headers=headers, media_type=OCTET_STREAM)
        digest = found.digest
        assert digest is not None  # ready() checked it
        release = self.downloads.take(request.subject)
        try:
            stream = self._open(found, digest, item, span.start, span.end)
        except BaseException:
            release()
            raise
        return FileStream(
            stream,
            reopen=lambda position: self._open(found, digest, item, position, span.end),
            start=span.start,
            length=span.length,
            count=self._metrics.served_bytes.inc,
            where=f"file {path!r} of {ref.describe()}",
            release=release,
            status_code=status,
            headers=headers,
        )


_WAIT_FOR_WRITABLE: Final[Message] = {"type": "http.response.body", "body": b"", "more_body": True}


class FileStream(StreamingResponse):
    """A stored file's bytes, read `READ_BYTES` and sent `SEND_BYTES` at a time; however the
    response ends (done, disconnect, drop, error) the store stream is closed and the download's
    slot freed.

    Before each piece an empty body message is sent, which waits until the transport has taken the
    previous one, so more is read only for a reader that reads. A reader that has not taken its
    last piece within `HOLD_STREAM_SECONDS` gives back its store stream (a file handle, an S3
    connection) and what was read ahead, and gets a new stream at its position once it reads again.
    """

    def __init__(
        self,
        stream: BinaryIO,
        *,
        reopen: Callable[[int], BinaryIO],
        start: int,
        length: int,
        count: Callable[[int], None],
        where: str,
        release: Callable[[], None],
        status_code: int,
        headers: Mapping[str, str],
    ) -> None:
        super().__init__(_no_body(), status_code=status_code, headers=headers, media_type=OCTET_STREAM)
        self._stream: BinaryIO | None = stream
        self._reopen = reopen
        self._position = start
        self._remaining = length
        self._count = count
        self._where = where
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._close_stream()
            self._release()

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    async def _taken_in_time(self, send: Send) -> bool:
        """Whether the transport takes what was sent within `HOLD_STREAM_SECONDS`; if not, the
        store stream is given back (a file handle, an S3 connection) and False is the answer."""
        with anyio.move_on_after(HOLD_STREAM_SECONDS) as waited:
            await send(_WAIT_FOR_WRITABLE)
        if waited.cancelled_caught:
            self._close_stream()
            return False
        return True

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        while self._remaining > 0:
            if self._stream is not None:
                await self._taken_in_time(send)
            if self._stream is None:
                # However long it takes: the connection's stall timeout resets a reader that never reads.
                await send(_WAIT_FOR_WRITABLE)
                self._stream = await run_in_threadpool(self._reopen, self._position)
            await self._send_one_read(send, self._stream)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_one_read(self, send: Send, stream: BinaryIO) -> None:
        # Its own frame: what it read is freed when it returns, also when it returns early.
        data = await run_in_threadpool(stream.read, min(READ_BYTES, self._remaining))
        if not data:
            # The headers promised the length; cutting the connection is the only honest end.
            log.error(
                "a stored file is shorter than its manifest says",
                extra={"file": self._where, "missing": self._remaining},
            )
            raise ObjectStoreError(
                f"{self._where} ended {self._remaining} bytes before the size its manifest records"
            )
        view = memoryview(data)
        for offset in range(0, len(view), SEND_BYTES):
            if offset and not await self._taken_in_time(send):
                return  # the rest is read again from where the reader is, once it reads
            piece = view[offset : offset + SEND_BYTES]
            self._position += len(piece)
            self._remaining -= len(piece)
            self._count(len(piece))
            await send({"type": "http.response.body", "body": piece, "more_body": True})


def _unbuffered(stream: BinaryIO) -> BinaryIO:
    """The stream without the store's read-ahead buffer (a quarter MiB per open stream, which a
    few hundred stalled readers would multiply): serving reads whole chunks anyway."""
    if isinstance(stream, io.BufferedReader):
        # Nothing was read yet, so nothing buffered is lost; the buffer goes with the wrapper.
        return typing.cast(BinaryIO, stream.detach())
    return stream


async def _no_body() -> AsyncIterator[bytes]:
    # FileStream sends its own body; StreamingResponse wants an iterator all the same.
    nothing: tuple[bytes, ...] = ()
    for piece in nothing:
        yield piece
