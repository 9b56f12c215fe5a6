"""Receiving an upload: URL token, caller, object, slot, claim, reservation, then the body.

Every check that can refuse the upload runs before the body is read, so a client that sends
`Expect: 100-continue` (curl does for large files) is refused without transferring anything:
the URL's signed token (401/403), the caller's own Kubernetes token and its right to `update` the
object (TokenReview and SubjectAccessReview: a reader of `status.upload` cannot upload, D40), the
object (410, 409) and that the URL is the one its status holds now (403: a new URL replaces the
old), a free upload slot of this replica (503), the object's claim in the store (409: one upload
per object across replicas, D42), the storage reservation (507).

Then the first bytes decide the format, and the body flows from the event loop through a
`BodyPipe` into `put_stream` on a thread of the upload executor, in constant memory, hashed on
the way, judged by its `Pace` (idle timeout, minimum rate, deadline: a trickle is cut off, D41).
The record (`upload.json`) is written last, and only while the client is still connected; any
failure deletes the payload, releases the reservation and the claim. Tokens are never logged:
the owner is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import email.message
import functools
import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request

from ai_models.adapters.objectstore import ObjectStore, ObjectStoreError, SizeMismatch
from ai_models.api.auth import Access, Gatekeeper
from ai_models.api.metrics import ApiMetrics
from ai_models.api.model_objects import ApiModels, ModelObject
from ai_models.api.models import ProblemType
from ai_models.api.problems import (
    ApiProblem,
    invalid_parameter,
    object_gone,
    store_failed,
    wrong_phase,
)
from ai_models.api.signing_keys import SigningKeys, token_expired, token_invalid
from ai_models.api.upload.body_pipe import BodyPipe, ReaderGone
from ai_models.api.upload.claims import CLAIM_LEASE_SECONDS, ClaimKeeper, UploadClaims
from ai_models.api.upload.ledger import UploadLedger, describe_owner, size_text
from ai_models.api.upload.models import UploadReceipt
from ai_models.api.upload.pace import Pace, PaceFailure, UploadLimits
from ai_models.domain.artifacts.layout import upload_payload_key, upload_record_key
from ai_models.domain.artifacts.sniff import (
    ACCEPTED_DESCRIPTION,
    SNIFF_BYTES,
    filename_note,
    safe_filename,
    sniff,
)
from ai_models.domain.artifacts.upload_record import UploadRecord, record_to_json
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner
from ai_models.names import UPLOADS_PATH, ModelKind, ModelPhase

log = logging.getLogger(__name__)

T = TypeVar("T")
# Bytes in flight between the event loop and the store thread; the store adds its own chunk.
PIPE_BYTES: Final = 4 * 1024 * 1024
# The body arrives in pieces of up to 256 KiB; the store thread gets them joined into pieces of
# this size, so it takes the GIL back (after hashing, after writing) a few times per MiB instead
# of a few times per piece: each take can wait for the busy event loop thread's switch interval.
HANDOFF_BYTES: Final = 1024 * 1024
DEFAULT_MAX_CONCURRENT_UPLOADS: Final = 64
# What a client refused for a busy replica is told to wait before trying again.
BUSY_RETRY_AFTER_SECONDS: Final = 30
# The verb an upload needs on its object: it replaces what the object will serve.
UPLOAD_VERB: Final = "update"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class BodyFailure(Exception):
    """Why the body stopped before its end; raised to the store thread through the pipe."""

    status = 400


class ClientGone(BodyFailure):
    pass


class ClientTooSlow(BodyFailure):
    """Idle for too long, below the minimum rate over a window, or past the deadline."""

    status = 408


class UploadCancelled(BodyFailure):
    status = 503


class HashingSource:
    """What `put_stream` reads: the pipe, hashed and counted on the way (on the store thread)."""

    def __init__(self, pipe: BodyPipe, *, on_bytes: Callable[[int], None]) -> None:
        self._pipe = pipe
        self._on_bytes = on_bytes
        self._sha256 = hashlib.sha256()
        self.count = 0

    def read(self, size: int = -1, /) -> bytes:
        data = self._pipe.read(size)
        if data:
            self._sha256.update(data)
            self.count += len(data)
            self._on_bytes(len(data))
        return data

    def hexdigest(self) -> str:
        return self._sha256.hexdigest()


def content_length(headers: Headers) -> int | None:
    """The announced body size; None for a chunked body (HTTP/1.1 guarantees it is valid)."""
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        size = int(value)
    except ValueError:
        raise invalid_parameter(f"header Content-Length: {value!r} is not a number of bytes") from None
    if size < 0:
        raise invalid_parameter(f"header Content-Length: {value!r} is negative")
    return size


def disposition_filename(value: str | None) -> str | None:
    """`filename` (or RFC 2231 `filename*`) of a Content-Disposition header."""
    if not value:
        return None
    message = email.message.Message()
    message["content-disposition"] = value
    try:
        name = message.get_filename()
    except (ValueError, LookupError):
        return None
    return name or None


@dataclasses.dataclass(frozen=True)
class Stored:
    size_bytes: int
    sha256: str


def upload_access(ref: ModelKey) -> Access:
    """`update` on the object the upload is for: Editor in the Model's namespace, ClusterEditor for
    a ClusterModel. Reading the object (and so its status.upload) is not enough."""
    if ref.kind is ModelKind.MODEL:
        fix = (
            f"ask for the ai-models Editor access level in namespace {ref.namespace!r}; reading the "
            "Model (and its status.upload) does not allow uploading to it"
        )
    else:
        fix = (
            "ask a cluster administrator for the ai-models ClusterEditor access level; reading the "
            "ClusterModel (and its status.upload) does not allow uploading to it"
        )
    return Access(
        verb=UPLOAD_VERB,
        resource=ref.kind.plural.value,
        namespace=ref.namespace if ref.kind is ModelKind.MODEL else None,
        name=ref.name,
        fix=fix,
    )


def bearer_hint(ref: ModelKey) -> str:
    """How to send the caller's own Kubernetes token with the upload."""
    return (
        f"an upload to {ref.describe()} also needs the Kubernetes token of a subject allowed to update "
        'it: curl -T model.gguf -H "Authorization: Bearer $(kubectl create token <service-account> -n '
        '<namespace>)" "$URL", or your own user\'s token (kubectl config view --raw --minify -o '
        "jsonpath='{.users[0].user.token}')"
    )


def status_tokens(status: Mapping[str, Any]) -> tuple[str, ...]:
    """The tokens of the upload URLs the object's status holds now (the controller issues one token
    per URL pair; a newer one replaces it)."""
    upload = status.get("upload")
    if not isinstance(upload, Mapping):
        return ()
    found = []
    for field in ("inCluster", "external"):
        url = upload.get(field)
        if isinstance(url, str) and UPLOADS_PATH in url:
            found.append(url.rpartition(UPLOADS_PATH)[2].partition("?")[0])
    return tuple(found)


class Uploads:
    def __init__(
        self,
        *,
        store: ObjectStore,
        keys: SigningKeys,
        models: ApiModels,
        ledger: UploadLedger,
        gatekeeper: Gatekeeper,
        metrics: ApiMetrics,
        limits: UploadLimits | None = None,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT_UPLOADS,
        replica: str = "api",
        clock: Callable[[], datetime.datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._keys = keys
        self._models = models
        self._ledger = ledger
        self._gatekeeper = gatekeeper
        self._metrics = metrics
        self._limits = limits or UploadLimits()
        self._clock = clock
        self._monotonic = monotonic
        self._claims = UploadClaims(store=store, replica=replica, clock=clock)
        self._max_concurrent = max_concurrent
        # Slots are taken and given back on the event loop only, so a plain counter is enough.
        self._busy = 0
        # A thread per upload for its whole duration: kept apart from the request thread pool so
        # long uploads never starve short requests. Never more uploads than threads: see _slot.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrent, thread_name_prefix="upload"
        )

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def receive(self, *, token: str, request: Request, filename: str | None) -> UploadReceipt:
        grant = await run_in_threadpool(functools.partial(self._keys.verify, token, now=self._clock()))
        owner = grant.owner
        ref = _ref(owner)
        await run_in_threadpool(self._admit, ref, request.headers.get("authorization"))
        found = await run_in_threadpool(functools.partial(self._models.get, ref, fresh=True))
        _check_target(ref, owner, found)
        assert found is not None
        _check_current(ref, token, found)
        length = content_length(request.headers)
        if length is None and self._ledger.capacity_bytes is not None:
            raise ApiProblem(
                ProblemType.LENGTH_REQUIRED,
                411,
                f"{ref.describe()}: a storage budget is set, so the upload's size must be known before it "
                "starts; send Content-Length (curl -T does) instead of a chunked body",
            )
        with self._slot(ref):
            pace = Pace(limits=self._limits, started=self._monotonic(), size_bytes=length)
            claim = await run_in_threadpool(
                functools.partial(self._claims.take, owner, lifetime_seconds=CLAIM_LEASE_SECONDS)
            )
            keeper = ClaimKeeper(self._claims, owner, claim)
            try:
                # After the claim: an upload that finished on another replica a moment ago has
                # released its claim only once its record was written.
                record = await self._in_store(self._store.head, upload_record_key(owner))
                if record is not None:
                    raise ApiProblem(
                        ProblemType.UPLOAD_CONFLICT,
                        409,
                        f"{ref.describe()}: an upload was already received; the controller publishes it "
                        "next (watch the object's phase)",
                    )
                if length is not None:
                    await run_in_threadpool(functools.partial(self._ledger.reserve, owner, size_bytes=length))
                try:
                    return await keeper.run(
                        self._receive_body(owner, request, pace=pace, length=length, filename=filename)
                    )
                except BaseException:
                    # A lost claim's payload key and reservation belong to its new holder now.
                    if keeper.lost is None:
                        await asyncio.shield(self._discard(owner, reserved=length is not None))
                    raise
            finally:
                await asyncio.shield(run_in_threadpool(self._claims.release, owner, keeper.claim))

    def _admit(self, ref: ModelKey, authorization: str | None) -> None:
        try:
            self._gatekeeper.admit(authorization, access=upload_access(ref))
        except ApiProblem as problem:
            if problem.kind is ProblemType.UNAUTHENTICATED:
                raise ApiProblem(
                    problem.kind,
                    problem.status,
                    f"{problem.detail}; {bearer_hint(ref)}",
                    headers=problem.headers,
                ) from None
            raise

    @contextlib.contextmanager
    def _slot(self, ref: ModelKey) -> Iterator[None]:
        if self._busy >= self._max_concurrent:
            raise ApiProblem(
                ProblemType.REPLICA_BUSY,
                503,
                f"{ref.describe()}: all {self._max_concurrent} upload slots of this api replica are busy; "
                f"retry in {BUSY_RETRY_AFTER_SECONDS} s (an upload slower than "
                f"{self._limits.min_bytes_per_second} bytes/s is cut off, which frees its slot)",
                headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)},
            )
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1

    async def _receive_body(
        self, owner: Owner, request: Request, *, pace: Pace, length: int | None, filename: str | None
    ) -> UploadReceipt:
        started = time.perf_counter()
        body = PacedBody(request.stream().__aiter__(), pace=pace, clock=self._monotonic)
        try:
            head = await self._head(body)
            payload_format = sniff(head[:SNIFF_BYTES])
            if payload_format is None:
                raise ApiProblem(
                    ProblemType.UNSUPPORTED_PAYLOAD,
                    415,
                    f"{describe_owner(owner)}: the payload's first bytes are not a supported format (file "
                    f"names and Content-Type are not looked at); upload {ACCEPTED_DESCRIPTION}",
                )
            stored = await self._stream(owner, head, body, length=length)
        finally:
            body.close()
        # A client that gave up (its connection is gone) gets no answer; keeping its bytes would
        # publish an upload its owner believes failed.
        if await request.is_disconnected():
            raise _incomplete(ClientGone("the client closed the connection before the upload was recorded"))
        received_at = self._clock().replace(microsecond=0)
        stored_name = safe_filename(filename, payload_format)
        record = UploadRecord(
            sha256=stored.sha256,
            size_bytes=stored.size_bytes,
            format=payload_format,
            filename=stored_name,
            received_at=received_at.isoformat().replace("+00:00", "Z"),
        )
        await self._in_store(self._store.put_bytes, upload_record_key(owner), record_to_json(record))
        seconds = time.perf_counter() - started
        log.info(
            "upload received",
            extra={
                "owner": describe_owner(owner),
                "uid": owner.uid,
                "bytes": stored.size_bytes,
                "sha256": stored.sha256,
                "format": payload_format.value,
                "seconds": round(seconds, 3),
            },
        )
        return UploadReceipt(
            sizeBytes=stored.size_bytes,
            sha256=stored.sha256,
            format=payload_format,
            receivedAt=received_at,
            filename=stored_name,
            filenameNote=filename_note(filename, stored_name, payload_format),
        )

    async def _head(self, body: PacedBody) -> bytes:
        head = b""
        while len(head) < SNIFF_BYTES:
            try:
                chunk = await body.next()
            except BodyFailure as failure:
                raise _incomplete(failure) from None
            if chunk is None:
                break
            head += chunk
        return head

    async def _pump(self, head: bytes, body: PacedBody, pipe: BodyPipe) -> None:
        """Move the body into the pipe; whatever stops it early is handed to the reader."""
        try:
            pending, size = [head], len(head)
            while (chunk := await body.next()) is not None:
                pending.append(chunk)
                size += len(chunk)
                if size >= HANDOFF_BYTES:
                    await pipe.put(b"".join(pending))
                    pending, size = [], 0
            await pipe.put(b"".join(pending))
        except ReaderGone:
            return
        except BodyFailure as failure:
            pipe.fail(failure)
            return
        except BaseException:
            pipe.fail(UploadCancelled("the replica stopped receiving the upload (it is shutting down)"))
            raise
        pipe.end()

    async def _stream(self, owner: Owner, head: bytes, body: PacedBody, *, length: int | None) -> Stored:
        pipe = BodyPipe(loop=asyncio.get_running_loop(), max_buffered=PIPE_BYTES)
        source = HashingSource(pipe, on_bytes=self._metrics.upload_bytes.inc)
        pump = asyncio.create_task(self._pump(head, body, pipe))
        writing = self._executor.submit(
            self._store.put_stream, upload_payload_key(owner), source, size=length
        )
        try:
            await asyncio.wrap_future(writing)
        except BaseException as error:
            # The store thread must be done before the caller deletes the payload, or it could
            # finish writing it afterwards.
            pipe.fail(UploadCancelled("the upload was stopped"))
            pipe.abandon()
            await _settle(writing, pump)
            if isinstance(error, Exception):
                raise _store_failure(owner, error, received=source.count, length=length) from error
            raise
        await pump
        return Stored(size_bytes=source.count, sha256=source.hexdigest())

    async def _in_store(self, call: Callable[..., T], *args: object) -> T:
        try:
            return await run_in_threadpool(call, *args)
        except ObjectStoreError as error:
            raise store_failed(
                error,
                "the object store failed (the api replica logged the cause); nothing was kept, upload again",
            ) from error

    async def _discard(self, owner: Owner, *, reserved: bool) -> None:
        def discard() -> None:
            try:
                self._store.delete(upload_payload_key(owner))
            except ObjectStoreError as error:
                log.error(
                    "cannot delete the payload of a failed upload",
                    extra={"owner": describe_owner(owner), "error": str(error)},
                )
            if reserved:
                self._ledger.release(owner)

        await run_in_threadpool(discard)
        log.info("failed upload discarded", extra={"owner": describe_owner(owner), "reserved": reserved})


class PacedBody:
    """The request body chunk by chunk, judged by its `Pace`.

    A chunk is awaited directly (the hot path costs a counter update); a watchdog timer wakes up
    for the pace's next decision (window end, idle limit, deadline), at most about once per window.
    When the pace fails while the body is being awaited, the awaiting task is cancelled and the
    wait ends in ClientTooSlow; when it fails while the body is elsewhere (the store pushing back),
    the next `next` raises it.
    """

    def __init__(self, chunks: AsyncIterator[bytes], *, pace: Pace, clock: Callable[[], float]) -> None:
        self._chunks = chunks
        self._pace = pace
        self._clock = clock
        self._failure: PaceFailure | None = None
        self._reader: asyncio.Task[Any] | None = None
        self._cancelled_reader = False
        self._timer: asyncio.TimerHandle | None = None

    async def next(self) -> bytes | None:
        """The next non-empty chunk, None at the end; raises ClientTooSlow or ClientGone."""
        self._judge()
        if self._failure is not None:
            raise ClientTooSlow(str(self._failure))
        if self._timer is None:
            self._arm()
        task = asyncio.current_task()
        self._reader = task
        try:
            while True:
                try:
                    chunk = await anext(self._chunks)
                except StopAsyncIteration:
                    return None
                except ClientDisconnect:
                    raise ClientGone("the client closed the connection before the end of the body") from None
                except asyncio.CancelledError:
                    if not self._cancelled_reader or task is None or task.cancelling() > 1:
                        raise
                    self._cancelled_reader = False
                    task.uncancel()
                    raise ClientTooSlow(str(self._failure)) from None
                if chunk:
                    self._pace.received_bytes(len(chunk), now=self._clock())
                    return chunk
        finally:
            self._reader = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _judge(self) -> None:
        if self._failure is None:
            try:
                self._pace.check(now=self._clock())
            except PaceFailure as failure:
                self._failure = failure

    def _arm(self) -> None:
        delay = self._pace.wait_seconds(now=self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._watch)

    def _watch(self) -> None:
        self._timer = None
        self._judge()
        if self._failure is None:
            self._arm()
        elif self._reader is not None and not self._reader.done():
            self._cancelled_reader = True
            self._reader.cancel()


async def _settle(writing: concurrent.futures.Future[Any], pump: asyncio.Task[None]) -> None:
    pump.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.shield(asyncio.wrap_future(writing))
    with contextlib.suppress(BaseException):
        await pump


def _ref(owner: Owner) -> ModelKey:
    try:
        kind = ModelKind(owner.kind)
    except ValueError:
        raise token_invalid(
            f"the upload token names a {owner.kind!r}, which is neither a Model nor a ClusterModel; copy "
            "the URL from status.upload again"
        ) from None
    namespace = owner.namespace if kind is ModelKind.MODEL else ""
    return ModelKey(kind=kind, namespace=namespace, name=owner.name)


def _check_target(ref: ModelKey, owner: Owner, found: ModelObject | None) -> None:
    if found is None:
        raise object_gone(
            f"{ref.describe()} no longer exists; the upload URL was issued for the deleted object "
            f"(uid {owner.uid}). Create the object again and use the URL in its status.upload"
        )
    if found.uid != owner.uid:
        raise object_gone(
            f"{ref.describe()} was deleted and created again (uid {found.uid}, the URL is for uid "
            f"{owner.uid}); use the URL in the new object's status.upload"
        )
    if found.phase is not ModelPhase.WAIT_FOR_UPLOAD:
        raise wrong_phase(
            f"{ref.describe()} is in phase {found.phase.value}, not {ModelPhase.WAIT_FOR_UPLOAD.value}: it "
            "takes an upload only while it waits for one (see its conditions)"
        )


def _check_current(ref: ModelKey, token: str, found: ModelObject) -> None:
    """The URL must be the one the object's status holds now: a new URL replaces every older one."""
    presented = token.encode()
    if not any(hmac.compare_digest(presented, current.encode()) for current in status_tokens(found.status)):
        raise token_expired(
            f"{ref.describe()}: this upload URL was replaced by a newer one (the controller issues a new URL "
            "before the old one expires, and after an upload it could not publish); use the URL in the "
            "object's status.upload now"
        )


def _incomplete(failure: BodyFailure) -> ApiProblem:
    return ApiProblem(
        ProblemType.UPLOAD_INCOMPLETE, failure.status, f"{failure}; nothing was kept, upload again"
    )


def _store_failure(owner: Owner, error: Exception, *, received: int, length: int | None) -> ApiProblem:
    what = describe_owner(owner)
    expected = f" of {size_text(length)}" if length is not None else ""
    if isinstance(error, BodyFailure):
        return ApiProblem(
            ProblemType.UPLOAD_INCOMPLETE,
            error.status,
            f"{what}: {error} (received {size_text(received)}{expected}); nothing was kept, upload again",
        )
    if isinstance(error, SizeMismatch):
        return ApiProblem(
            ProblemType.UPLOAD_INCOMPLETE,
            400,
            f"{what}: the body does not match its Content-Length (received {size_text(received)}{expected}); "
            "nothing was kept, upload again",
        )
    if isinstance(error, ObjectStoreError):
        return store_failed(
            error,
            f"{what}: the object store failed storing the upload (the api replica logged the cause); "
            "nothing was kept, upload again",
            owner=what,
        )
    log.error("upload failed unexpectedly", exc_info=error, extra={"owner": what})
    return ApiProblem(
        ProblemType.INTERNAL_ERROR,
        500,
        f"{what}: the upload failed ({type(error).__name__}); the replica logged the details; nothing was "
        "kept, upload again",
    )
