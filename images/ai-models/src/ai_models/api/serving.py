"""The serving API's answers: the manifest and the files of a Ready object's artifact.

The artifact is the one `status.artifact.digest` names; its manifest is immutable (the digest is
its directory), so parsed manifests are kept in a small LRU and a file request costs one store
read. Files are streamed from `open_range` in constant memory, a bounded chunk at a time, and
only paths the manifest lists are served: nothing else under the artifact (or outside it) can be
reached by a crafted path.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import BinaryIO, Final

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.api.metrics import ApiMetrics
from ai_models.api.model_objects import ModelObject, ModelReader, ObjectRef
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem, not_found, object_store_error, wrong_phase
from ai_models.api.ranges import (
    ByteRange,
    RangeNotSatisfiable,
    none_match,
    quoted,
    range_applies,
    requested_range,
)
from ai_models.domain.artifacts.layout import file_key, manifest_key
from ai_models.domain.artifacts.manifest import ArtifactFile, ManifestFormatError, manifest_from_json
from ai_models.names import ModelPhase

log = logging.getLogger(__name__)

CHUNK_BYTES: Final = 256 * 1024
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
    """The parts of an HTTP request the serving answers depend on."""

    method: str
    range: str | None = None
    if_range: str | None = None
    if_none_match: str | None = None

    @property
    def head(self) -> bool:
        return self.method == "HEAD"


class ArtifactServer:
    def __init__(self, *, store: ObjectStore, models: ModelReader, metrics: ApiMetrics) -> None:
        self._store = store
        self._models = models
        self._metrics = metrics
        self._manifests: collections.OrderedDict[tuple[ObjectRef, str], ServedManifest] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    # Blocking: called from the request thread pool.

    def ready(self, ref: ObjectRef) -> tuple[ModelObject, ServedManifest]:
        """The Ready object and its artifact's manifest; raises 404, 409 or 502 problems."""
        found = self._models.get(ref)
        if found is None:
            raise not_found(f"there is no {ref.describe()}; check the name (and namespace)")
        digest = found.digest
        if found.phase is not ModelPhase.READY or digest is None:
            phase = found.phase.value if found.phase is not None else "none yet"
            raise wrong_phase(
                f"{ref.describe()} is in phase {phase}, not Ready: its files are served once it is Ready "
                "with a published artifact (see its conditions); retry then"
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
            raise object_store_error(f"cannot read {what}: {error}") from error
        served = ServedManifest(
            body=body, etag=quoted(digest), files={item.path: item for item in manifest.files}
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
            return self._store.open_range(file_key(found.owner, digest, item.path), start=start, end=end)
        except ObjectNotFound as error:
            raise object_store_error(
                f"file {item.path!r} of {found.ref.describe()} (artifact {digest}) is listed in the manifest "
                "but missing from the object store: the artifact is damaged; publishing it again repairs it"
            ) from error
        except ObjectStoreError as error:
            raise object_store_error(
                f"cannot read file {item.path!r} of {found.ref.describe()}: {error}"
            ) from error

    # Answers.

    def manifest_response(self, ref: ObjectRef, request: ServingRequest) -> Response:
        _found, manifest = self.ready(ref)
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

    def file_response(self, ref: ObjectRef, path: str, request: ServingRequest) -> Response:
        found, manifest = self.ready(ref)
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
        stream = self._open(found, digest, item, span.start, span.end)
        body = _body(
            stream,
            length=span.length,
            count=self._metrics.served_bytes.inc,
            where=f"file {path!r} of {ref.describe()}",
        )
        return StreamingResponse(body, status_code=status, headers=headers, media_type=OCTET_STREAM)


async def _body(
    stream: BinaryIO, *, length: int, count: Callable[[int], None], where: str
) -> AsyncIterator[bytes]:
    """`length` bytes of `stream`, a chunk at a time, each read on the thread pool; closes it."""
    remaining = length
    try:
        while remaining > 0:
            data = await run_in_threadpool(stream.read, min(CHUNK_BYTES, remaining))
            if not data:
                # The headers promised `length` bytes; cutting the connection is the only honest end.
                log.error(
                    "a stored file is shorter than its manifest says",
                    extra={"file": where, "missing": remaining},
                )
                raise ObjectStoreError(
                    f"{where} ended {remaining} bytes before the size its manifest records"
                )
            remaining -= len(data)
            count(len(data))
            yield data
    finally:
        stream.close()
