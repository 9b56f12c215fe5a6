"""Receiving an upload: token, object, reservation, sniffing, then the body streamed to the store.

Every check that can refuse the upload runs before the body is read, so a client that sends
`Expect: 100-continue` (curl does for large files) is refused without transferring anything.
Then the first bytes decide the format, and the body flows from the event loop through a
`BodyPipe` into `put_stream` on a thread of the upload executor, in constant memory, hashed on
the way. The record (`upload.json`) is written last; any failure deletes the payload and
releases the reservation. The token is never logged: the owner is.
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
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request

from ai_models.adapters.objectstore import ObjectStore, ObjectStoreError, SizeMismatch
from ai_models.api.body_pipe import BodyPipe, ReaderGone
from ai_models.api.metrics import ApiMetrics
from ai_models.api.model_objects import ModelObject, ModelReader, ObjectRef
from ai_models.api.models import ProblemType
from ai_models.api.models_upload import UploadReceipt
from ai_models.api.problems import ApiProblem, invalid_parameter, object_gone, object_store_error, wrong_phase
from ai_models.api.signing_keys import SigningKeys, token_invalid
from ai_models.api.upload_ledger import UploadLedger, describe_owner, size_text
from ai_models.domain.artifacts.layout import upload_payload_key, upload_record_key
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION, SNIFF_BYTES, safe_filename, sniff
from ai_models.domain.artifacts.upload_record import UploadRecord, record_to_json
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind, ModelPhase

log = logging.getLogger(__name__)

T = TypeVar("T")
# Bytes in flight between the event loop and the store thread; the store adds its own chunk.
PIPE_BYTES: Final = 4 * 1024 * 1024
# The body arrives in pieces of up to 256 KiB; the store thread gets them joined into pieces of
# this size, so it takes the GIL back (after hashing, after writing) a few times per MiB instead
# of a few times per piece: each take can wait for the busy event loop thread's switch interval.
HANDOFF_BYTES: Final = 1024 * 1024
DEFAULT_IDLE_TIMEOUT_SECONDS: Final = 300.0
DEFAULT_MAX_CONCURRENT_UPLOADS: Final = 64


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class BodyFailure(Exception):
    """Why the body stopped before its end; raised to the store thread through the pipe."""

    status = 400


class ClientGone(BodyFailure):
    pass


class ClientIdle(BodyFailure):
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


class Uploads:
    def __init__(
        self,
        *,
        store: ObjectStore,
        keys: SigningKeys,
        models: ModelReader,
        ledger: UploadLedger,
        metrics: ApiMetrics,
        idle_timeout_seconds: float = DEFAULT_IDLE_TIMEOUT_SECONDS,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT_UPLOADS,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self._store = store
        self._keys = keys
        self._models = models
        self._ledger = ledger
        self._metrics = metrics
        self._idle = idle_timeout_seconds
        self._clock = clock
        # A thread per upload for its whole duration: kept apart from the request thread pool so
        # long uploads never starve short requests.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrent, thread_name_prefix="upload"
        )
        self._in_flight: set[Owner] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def receive(self, *, token: str, request: Request, filename: str | None) -> UploadReceipt:
        grant = await run_in_threadpool(functools.partial(self._keys.verify, token, now=self._clock()))
        owner = grant.owner
        ref = _ref(owner)
        found = await run_in_threadpool(functools.partial(self._models.get, ref, fresh=True))
        _check_target(ref, owner, found)
        length = content_length(request.headers)
        if length is None and self._ledger.capacity_bytes is not None:
            raise ApiProblem(
                ProblemType.LENGTH_REQUIRED,
                411,
                f"{ref.describe()}: a storage budget is set, so the upload's size must be known before it "
                "starts; send Content-Length (curl -T does) instead of a chunked body",
            )
        with self._claim(owner):
            record = await self._in_store(self._store.head, upload_record_key(owner))
            if record is not None:
                raise ApiProblem(
                    ProblemType.UPLOAD_CONFLICT,
                    409,
                    f"{ref.describe()}: an upload was already received; the controller publishes it next "
                    "(watch the object's phase)",
                )
            if length is not None:
                await run_in_threadpool(functools.partial(self._ledger.reserve, owner, size_bytes=length))
            try:
                return await self._receive_body(owner, request, length=length, filename=filename)
            except BaseException:
                await asyncio.shield(self._discard(owner, reserved=length is not None))
                raise

    @contextlib.contextmanager
    def _claim(self, owner: Owner) -> Iterator[None]:
        with self._lock:
            if owner in self._in_flight:
                raise ApiProblem(
                    ProblemType.UPLOAD_CONFLICT,
                    409,
                    f"{describe_owner(owner)}: another upload for it is in progress; wait for it to finish "
                    "or fail",
                )
            self._in_flight.add(owner)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight.discard(owner)

    async def _receive_body(
        self, owner: Owner, request: Request, *, length: int | None, filename: str | None
    ) -> UploadReceipt:
        started = time.perf_counter()
        chunks = request.stream().__aiter__()
        head = await self._head(chunks)
        payload_format = sniff(head[:SNIFF_BYTES])
        if payload_format is None:
            raise ApiProblem(
                ProblemType.UNSUPPORTED_PAYLOAD,
                415,
                f"{describe_owner(owner)}: the payload's first bytes are not a supported format (file names "
                f"and Content-Type are not looked at); upload {ACCEPTED_DESCRIPTION}",
            )
        stored = await self._stream(owner, head, chunks, length=length)
        received_at = self._clock().replace(microsecond=0)
        record = UploadRecord(
            sha256=stored.sha256,
            size_bytes=stored.size_bytes,
            format=payload_format,
            filename=safe_filename(filename, payload_format),
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
            sizeBytes=stored.size_bytes, sha256=stored.sha256, format=payload_format, receivedAt=received_at
        )

    async def _next(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next chunk, None at the end; a client silent for the idle timeout raises ClientIdle."""
        try:
            async with asyncio.timeout(self._idle):
                return await anext(chunks)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise ClientIdle(f"the client sent nothing for {self._idle:g} s") from None
        except ClientDisconnect:
            raise ClientGone("the client closed the connection before the end of the body") from None

    async def _head(self, chunks: AsyncIterator[bytes]) -> bytes:
        head = b""
        while len(head) < SNIFF_BYTES:
            try:
                chunk = await self._next(chunks)
            except BodyFailure as failure:
                raise _incomplete(failure) from None
            if chunk is None:
                break
            head += chunk
        return head

    async def _pump(self, head: bytes, chunks: AsyncIterator[bytes], pipe: BodyPipe) -> None:
        """Move the body into the pipe; whatever stops it early is handed to the reader."""
        try:
            pending, size = [head], len(head)
            while (chunk := await self._next(chunks)) is not None:
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

    async def _stream(
        self, owner: Owner, head: bytes, chunks: AsyncIterator[bytes], *, length: int | None
    ) -> Stored:
        pipe = BodyPipe(loop=asyncio.get_running_loop(), max_buffered=PIPE_BYTES)
        source = HashingSource(pipe, on_bytes=self._metrics.upload_bytes.inc)
        pump = asyncio.create_task(self._pump(head, chunks, pipe))
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
            raise object_store_error(f"the object store failed: {error}") from error

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


async def _settle(writing: concurrent.futures.Future[Any], pump: asyncio.Task[None]) -> None:
    pump.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.shield(asyncio.wrap_future(writing))
    with contextlib.suppress(BaseException):
        await pump


def _ref(owner: Owner) -> ObjectRef:
    try:
        kind = ModelKind(owner.kind)
    except ValueError:
        raise token_invalid(
            f"the upload token names a {owner.kind!r}, which is neither a Model nor a ClusterModel; copy "
            "the URL from status.upload again"
        ) from None
    namespace = owner.namespace if kind is ModelKind.MODEL else ""
    return ObjectRef(kind=kind, namespace=namespace, name=owner.name)


def _check_target(ref: ObjectRef, owner: Owner, found: ModelObject | None) -> None:
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
        phase = found.phase.value if found.phase is not None else "none yet"
        raise wrong_phase(
            f"{ref.describe()} is in phase {phase}, not {ModelPhase.WAIT_FOR_UPLOAD.value}: it takes an "
            "upload only while it waits for one (see its conditions)"
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
            f"{what}: the body does not match its Content-Length ({error}); nothing was kept, upload again",
        )
    if isinstance(error, ObjectStoreError):
        return object_store_error(
            f"{what}: the object store failed storing the upload: {error}; nothing was kept"
        )
    log.error("upload failed unexpectedly", exc_info=error, extra={"owner": what})
    return ApiProblem(
        ProblemType.INTERNAL_ERROR,
        500,
        f"{what}: the upload failed ({type(error).__name__}); the replica logged the details; nothing was "
        "kept, upload again",
    )
