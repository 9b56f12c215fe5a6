"""A fake Hugging Face Hub: a real aiohttp server on 127.0.0.1, for the real huggingface_hub client.

It serves the routes catalog indexing and the naive per-model approach use:

    GET /api/models                               listing: author, search, pipeline_tag, filter (AND),
                                                  gated, sort, direction, limit, expand, full; pages
                                                  linked with `Link: <...>; rel="next"` carrying the
                                                  filters and an opaque cursor
    GET /api/models/{org}/{name}[/revision/{rev}] model_info (expand, blobs: size, blobId, lfs)
    GET|HEAD /{org}/{name}/resolve/{rev}/{file}   a model's `contents` byte for byte (streamed, with
                                                  Content-Length, ETag, X-Repo-Commit and Range),
                                                  else config.json (and README.md)
    GET|HEAD /cdn-lfs/{org}/{name}/{rev}/{file}   LFS files, when `redirect_lfs()` sends them there
                                                  (on `localhost`: another origin than 127.0.0.1)

Private repositories (`FakeModel.private_token`) answer 401 with `X-Error-Code: RepoNotFound` to a
request without their token, as the real Hub does; gated ones refuse anonymous downloads.

Tests drive it from their own thread: the server runs its own event loop in a background thread,
and every control (corpus changes, required token, injected failures, latency, the request log)
is guarded by one lock. Other processes can reach it too: it is a plain TCP server.

    with FakeHub(make_corpus(300)) as hub:
        client = HubClient(endpoint=hub.url, token=None)
        hub.rate_limit_next(1, retry_after="7")
        ...
        assert hub.count("api") == 3
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import dataclasses
import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import pytest
from aiohttp import web
from multidict import MultiMapping

from fakes.aiohttp_server import ThreadedAiohttpServer
from fakes.hub_corpus import FakeModel, make_corpus, repository
from fakes.model_files import FileContent, content_chunks

__all__ = [
    "LISTING_PAGES",
    "FakeHub",
    "FakeModel",
    "RecordedRequest",
    "bucket_of",
    "fake_hub",
    "fake_hub_corpus",
    "make_corpus",
    "repository",
]

# A fault "bucket" that matches listing pages only (see `FakeHub.fail_next`).
LISTING_PAGES: Final = "listing"
MAX_PAGE: Final = 1000
DEFAULT_PAGE: Final = 1000
# What the real Hub answers for a listing item without `expand`.
DEFAULT_LISTING_FIELDS: Final = (
    "likes",
    "trendingScore",
    "private",
    "downloads",
    "tags",
    "pipeline_tag",
    "library_name",
    "createdAt",
)
EXPANDABLE: Final = frozenset(
    {
        "author",
        "cardData",
        "config",
        "createdAt",
        "disabled",
        "downloads",
        "downloadsAllTime",
        "gated",
        "gguf",
        "lastModified",
        "library_name",
        "likes",
        "pipeline_tag",
        "private",
        "safetensors",
        "sha",
        "siblings",
        "spaces",
        "tags",
        "transformersInfo",
        "trendingScore",
        "usedStorage",
        "widgetData",
    }
)
SORT_FIELDS: Final = {
    "downloads": "downloads",
    "likes": "likes",
    "lastModified": "last_modified",
    "createdAt": "created_at",
    "trendingScore": "trending_score",
}


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]  # lower-case names
    bucket: str  # "api" (/api/...), "resolve" (/.../resolve/...) or "other"
    status: int

    def params(self, name: str) -> list[str]:
        return [value for key, value in self.query if key == name]


@dataclasses.dataclass
class _Drop:
    remaining: int
    after_bytes: int
    bucket: str


@dataclasses.dataclass
class _Fault:
    remaining: int
    status: int
    headers: Mapping[str, str]
    bucket: str | None
    body: bytes | None
    skip: int = 0


def bucket_of(path: str) -> str:
    if path.startswith("/api/"):
        return "api"
    if path.startswith("/cdn-lfs/"):
        return "cdn"
    if "/resolve/" in path:
        return "resolve"
    return "other"


class FakeHub(ThreadedAiohttpServer):
    server_name = "fake Hub"
    backlog = 256

    def __init__(self, corpus: Iterable[FakeModel] = ()) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._models: dict[str, FakeModel] = {model.id: model for model in corpus}
        # Sorted listings by question (filters and sort, not the page): paging through a large
        # corpus would otherwise re-sort it for every page. Cleared whenever the corpus changes.
        self._listings: dict[tuple[tuple[str, str], ...], list[FakeModel]] = {}
        self._token: str | None = None
        self._faults: list[_Fault] = []
        self._drops: list[_Drop] = []
        self._redirect_lfs = False
        self._ignored_filters: frozenset[str] = frozenset()
        self._latency = 0.0
        self._log: list[RecordedRequest] = []
        self._record_log = True

    # ----- lifecycle -------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/api/models", self._list_models)
        app.router.add_get("/api/models/{org}/{name}", self._model_info)
        app.router.add_get("/api/models/{org}/{name}/revision/{revision}", self._model_info)
        app.router.add_route("GET", "/{org}/{name}/resolve/{revision}/{path:.+}", self._resolve)
        app.router.add_route("HEAD", "/{org}/{name}/resolve/{revision}/{path:.+}", self._resolve)
        app.router.add_route("GET", "/cdn-lfs/{org}/{name}/{revision}/{path:.+}", self._cdn)
        app.router.add_route("HEAD", "/cdn-lfs/{org}/{name}/{revision}/{path:.+}", self._cdn)
        return app

    # ----- controls (any thread) -------------------------------------------------------------

    @property
    def models(self) -> list[FakeModel]:
        with self._lock:
            return list(self._models.values())

    def model(self, model_id: str) -> FakeModel:
        with self._lock:
            return self._models[model_id]

    def add(self, *models: FakeModel) -> None:
        with self._lock:
            self._models.update((model.id, model) for model in models)
            self._listings.clear()

    def remove(self, *model_ids: str) -> None:
        with self._lock:
            for model_id in model_ids:
                self._models.pop(model_id, None)
            self._listings.clear()

    def update(self, model_id: str, **changes: Any) -> None:
        with self._lock:
            self._models[model_id] = dataclasses.replace(self._models[model_id], **changes)
            self._listings.clear()

    def require_token(self, token: str | None) -> None:
        """Every request must carry `Authorization: Bearer <token>` (401 without one, 403 if wrong)."""
        with self._lock:
            self._token = token

    def fail_next(
        self,
        count: int,
        *,
        status: int,
        headers: Mapping[str, str] | None = None,
        bucket: str | None = None,
        body: bytes | None = None,
        after: int = 0,
    ) -> None:
        """Answer `count` requests (of `bucket`, or any) with `status`, `headers` and `body` (a JSON
        error object when None), once `after` of them have been answered normally. A 200 with an
        odd body imitates a misbehaving mirror. `bucket=LISTING_PAGES` counts and fails only the
        `/api/models` listing pages, not the other api requests beside them (sizes)."""
        with self._lock:
            self._faults.append(_Fault(count, status, dict(headers or {}), bucket, body, after))

    def rate_limit_next(
        self,
        count: int,
        *,
        retry_after: str | None = None,
        headers: Mapping[str, str] | None = None,
        bucket: str | None = None,
        after: int = 0,
    ) -> None:
        sent = dict(headers or {})
        if retry_after is not None:
            sent["Retry-After"] = retry_after
        self.fail_next(count, status=429, headers=sent, bucket=bucket, after=after)

    def error_next(self, count: int, *, status: int = 503, bucket: str | None = None, after: int = 0) -> None:
        self.fail_next(count, status=status, bucket=bucket, after=after)

    def drop_next(self, count: int, *, after_bytes: int, bucket: str = "resolve") -> None:
        """Cut the connection of the next `count` file downloads (of `bucket`) longer than
        `after_bytes` after that many bytes of the body, as a flaky network does."""
        with self._lock:
            self._drops.append(_Drop(count, after_bytes, bucket))

    def redirect_lfs(self, enabled: bool = True) -> None:
        """Answer downloads of LFS files with a 302 to `http://localhost:<port>/cdn-lfs/...`, another
        origin, as the real Hub redirects to its CDN."""
        with self._lock:
            self._redirect_lfs = enabled

    def ignore_filters(self, *params: str) -> None:
        """List as if these query parameters (`author`, `search`, `pipeline_tag`, `filter`, `gated`)
        were not sent, as a mirror that does not implement them does; no argument: honour them all."""
        with self._lock:
            self._ignored_filters = frozenset(params)
            self._listings.clear()

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._drops.clear()

    def set_latency(self, seconds: float) -> None:
        with self._lock:
            self._latency = seconds

    def requests(self, bucket: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [entry for entry in self._log if bucket is None or entry.bucket == bucket]

    def count(self, bucket: str | None = None) -> int:
        return len(self.requests(bucket))

    def listing_pages(self) -> list[RecordedRequest]:
        """The `/api/models` listing requests (pages), apart from other API requests."""
        return [entry for entry in self.requests("api") if entry.path == "/api/models"]

    def size_requests(self) -> list[RecordedRequest]:
        """File lists with sizes (`/api/models/{id}/revision/{rev}?blobs=true`), the catalog's size
        requests and the controller's snapshot alike."""
        return [
            entry
            for entry in self.requests("api")
            if "/revision/" in entry.path and entry.params("blobs") == ["true"]
        ]

    def counts(self) -> collections.Counter[str]:
        with self._lock:
            return collections.Counter(entry.bucket for entry in self._log)

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()

    def record_requests(self, enabled: bool) -> None:
        """Keep (default) or stop keeping the request log; benchmarks switch it off."""
        with self._lock:
            self._record_log = enabled

    # ----- server side -----------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        bucket = bucket_of(request.path)
        with self._lock:
            latency = self._latency
            fault = self._take_fault(bucket, listing=request.path == "/api/models")
            token = self._token
        if latency:
            await asyncio.sleep(latency)
        response: web.StreamResponse
        # The CDN takes signed URLs, not the Hub's tokens.
        if (
            token is not None
            and bucket != "cdn"
            and request.headers.get("Authorization") != f"Bearer {token}"
        ):
            missing = "Authorization" not in request.headers
            response = _error(401 if missing else 403, "Invalid credentials in Authorization header")
        elif fault is not None and fault.body is not None:
            response = web.Response(body=fault.body, status=fault.status, headers=fault.headers)
        elif fault is not None:
            response = web.json_response({"error": "injected"}, status=fault.status, headers=fault.headers)
        else:
            response = await handler(request)
        if not request.get(_RECORDED):
            self._record(request, response.status)
        return response

    def _record(self, request: web.Request, status: int) -> None:
        """Log `request`; a streamed body records itself before it is sent (see `_send`), so a
        client that has read the whole answer always finds the request in the log."""
        request[_RECORDED] = True
        with self._lock:
            if self._record_log:
                self._log.append(
                    RecordedRequest(
                        method=request.method,
                        path=request.path,
                        query=tuple(request.query.items()),
                        headers={key.lower(): value for key, value in request.headers.items()},
                        bucket=bucket_of(request.path),
                        status=status,
                    )
                )

    def _take_fault(self, bucket: str, *, listing: bool) -> _Fault | None:
        # LISTING_PAGES aims at listing pages only, not the size requests of the same api bucket.
        for fault in self._faults:
            if fault.remaining > 0 and fault.bucket in (None, bucket, LISTING_PAGES if listing else None):
                if fault.skip > 0:
                    fault.skip -= 1
                    return None
                fault.remaining -= 1
                return fault
        return None

    async def _list_models(self, request: web.Request) -> web.Response:
        query = request.query
        expand = query.getall("expand", [])
        unknown = sorted(set(expand) - EXPANDABLE)
        if unknown:
            return _error(400, f"Invalid expand values: {', '.join(unknown)}")
        sort = query.get("sort")
        if sort is not None and sort not in SORT_FIELDS:
            return _error(400, f"Invalid sort: {sort}")
        try:
            limit = min(MAX_PAGE, max(1, int(query.get("limit", DEFAULT_PAGE))))
            offset = _decode_cursor(query["cursor"]) if "cursor" in query else 0
        except ValueError as error:
            return _error(400, str(error))
        question = tuple(sorted((key, value) for key, value in query.items() if key not in _PAGING))
        with self._lock:
            selected = self._listings.get(question)
            if selected is None:
                selected = _select(self._models.values(), query, ignored=self._ignored_filters)
                self._listings[question] = selected
        page = selected[offset : offset + limit]
        full = query.get("full", "").lower() in ("true", "1")
        items = [_listing_item(model, expand=expand, full=full) for model in page]
        headers = {}
        if offset + limit < len(selected):
            next_query = [(key, value) for key, value in query.items() if key != "cursor"]
            next_query.append(("cursor", _encode_cursor(offset + limit)))
            headers["Link"] = f'<{request.url.with_query(next_query)}>; rel="next"'
        return web.json_response(items, headers=headers, dumps=_dumps)

    async def _model_info(self, request: web.Request) -> web.Response:
        model_id = f"{request.match_info['org']}/{request.match_info['name']}"
        with self._lock:
            model = self._models.get(model_id)
        if model is None:
            return _error(404, "Repository not found", code="RepoNotFound")
        if _hidden(model, request):
            return _private_error()
        revision = request.match_info.get("revision")
        if revision not in (None, "main", model.sha):
            return _error(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        expand = request.query.getall("expand", [])
        info = _listing_item(model, expand=expand, full=not expand)
        if request.query.get("blobs", "").lower() == "true" and "siblings" in info:
            info["siblings"] = [_sibling(model, sibling["rfilename"]) for sibling in info["siblings"]]
        return web.json_response(info, dumps=_dumps)

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        model_id = f"{request.match_info['org']}/{request.match_info['name']}"
        with self._lock:
            model = self._models.get(model_id)
            token = self._token
            redirect_lfs = self._redirect_lfs
        if model is None:
            return _error(404, "Repository not found", code="RepoNotFound")
        if _hidden(model, request):
            return _private_error()
        if request.match_info["revision"] not in ("main", model.sha):
            return _error(404, "Revision not found", code="RevisionNotFound")
        if model.gated and token is None and "Authorization" not in request.headers:
            return _error(401, f"Access to model {model.id} is restricted.", code="GatedRepo")
        path = request.match_info["path"]
        body = model.content(path)
        if body is None:
            return _error(404, "Entry not found", code="EntryNotFound")
        headers = {"X-Repo-Commit": model.sha, "Content-Type": _content_type(path)}
        if model.contents is not None and path in model.contents:
            blob = model.blob(path)
            assert blob is not None
            lfs = blob.get("lfs")
            headers["ETag"] = f'"{lfs["sha256"] if lfs else blob["blobId"]}"'
            if lfs and redirect_lfs:
                headers["X-Linked-Size"] = str(lfs["size"])
                headers["X-Linked-Etag"] = headers["ETag"]
                headers["Location"] = (
                    f"http://localhost:{self.port}/cdn-lfs/{model.id}/{model.sha}/{path}"
                    "?X-Amz-Signature=fake&Expires=9999999999"
                )
                return web.Response(status=302, headers=headers)
        else:
            assert isinstance(body, bytes)
            headers["ETag"] = f'"{hashlib.sha256(body).hexdigest()}"'
        return await self._send(request, body, headers, bucket="resolve")

    async def _cdn(self, request: web.Request) -> web.StreamResponse:
        model_id = f"{request.match_info['org']}/{request.match_info['name']}"
        with self._lock:
            model = self._models.get(model_id)
        path = request.match_info["path"]
        body = (
            model.content(path) if model is not None and model.sha == request.match_info["revision"] else None
        )
        if body is None or "X-Amz-Signature" not in request.query:
            return web.Response(status=403, text="<Error><Code>AccessDenied</Code></Error>")
        return await self._send(request, body, {"Content-Type": "binary/octet-stream"}, bucket="cdn")

    async def _send(
        self, request: web.Request, body: FileContent, headers: dict[str, str], *, bucket: str
    ) -> web.StreamResponse:
        """`body` (or the requested range of it), streamed in chunks of at most 1 MiB."""
        size = len(body)
        start, end = 0, size
        status = 200
        wanted = _byte_range(request.headers.get("Range"), size)
        if wanted is _UNSATISFIABLE:
            return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})
        if isinstance(wanted, tuple):
            start, end = wanted
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        headers["Accept-Ranges"] = "bytes"
        if request.method == "HEAD":
            headers["Content-Length"] = str(end - start)
            return web.Response(status=status, headers=headers)
        with self._lock:
            # A drop waits for a body long enough to be cut where it says.
            drop = self._take_drop(bucket) if end - start > self._drop_threshold(bucket) else None
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = end - start
        self._record(request, status)
        await response.prepare(request)
        sent = 0
        for chunk in content_chunks(body, start, end):
            if drop is not None and sent + len(chunk) > drop.after_bytes:
                await response.write(chunk[: drop.after_bytes - sent])
                # Closing the transport mid-body is what a reset connection looks like to a client.
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(chunk)
            sent += len(chunk)
        await response.write_eof()
        return response

    def _drop_threshold(self, bucket: str) -> int:
        pending = [drop.after_bytes for drop in self._drops if drop.remaining > 0 and drop.bucket == bucket]
        return pending[0] if pending else 0

    def _take_drop(self, bucket: str) -> _Drop | None:
        for drop in self._drops:
            if drop.remaining > 0 and drop.bucket == bucket:
                drop.remaining -= 1
                return drop
        return None


_PAGING: Final = frozenset({"cursor", "limit", "expand", "full"})
_RECORDED: Final = web.RequestKey("fake_hub_recorded", bool)


def _select(
    models: Iterable[FakeModel], query: MultiMapping[str], *, ignored: frozenset[str] = frozenset()
) -> list[FakeModel]:
    selected = [model for model in models if _matches(model, query, ignored)]
    sort = query.get("sort")
    if sort is not None:
        descending = query.get("direction", "-1") == "-1"
        field = SORT_FIELDS[sort]
        # Ties broken by id so pages never overlap while the corpus is unchanged.
        selected.sort(key=lambda model: model.id)
        selected.sort(key=lambda model: getattr(model, field), reverse=descending)
    return selected


def _matches(model: FakeModel, query: MultiMapping[str], ignored: frozenset[str] = frozenset()) -> bool:
    def asked(name: str) -> str | None:
        return None if name in ignored else query.get(name)

    author = asked("author")
    if author is not None and model.author != author:
        return False
    search = asked("search")
    if search is not None and search.lower() not in model.id.lower():
        return False
    pipeline_tag = asked("pipeline_tag")
    if pipeline_tag is not None and model.pipeline_tag != pipeline_tag:
        return False
    if "filter" not in ignored and any(tag not in model.tags for tag in query.getall("filter", [])):
        return False
    gated = asked("gated")
    return gated is None or bool(model.gated) == (gated.lower() == "true")


def _listing_item(model: FakeModel, *, expand: Sequence[str], full: bool) -> dict[str, Any]:
    properties = model.properties()
    names: Iterable[str] = properties if full else expand or DEFAULT_LISTING_FIELDS
    item: dict[str, Any] = {"_id": hashlib.sha256(model.id.encode()).hexdigest()[:24], "id": model.id}
    for name in names:
        value = properties[name]
        if value is not None or name in ("pipeline_tag", "library_name"):
            item[name] = value
    if not expand:
        item["modelId"] = model.id
    return item


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["o"]
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"Invalid cursor: {cursor}") from error
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"Invalid cursor: {cursor}")
    return offset


_UNSATISFIABLE: Final = "unsatisfiable"
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(start, end exclusive) of a single-range `Range` header; None for the whole body."""
    if header is None:
        return None
    match = _RANGE.match(header.strip())
    if match is None or match.groups() == ("", ""):
        return None  # a malformed or multi-range header is ignored, as servers may
    first, last = match.groups()
    if first == "":
        suffix = int(last)
        return (max(0, size - suffix), size) if suffix else _UNSATISFIABLE
    start = int(first)
    if start >= size:
        return _UNSATISFIABLE
    end = size if last == "" else min(size, int(last) + 1)
    return (start, end) if end > start else _UNSATISFIABLE


def _hidden(model: FakeModel, request: web.Request) -> bool:
    return model.private_token is not None and request.headers.get("Authorization") != (
        f"Bearer {model.private_token}"
    )


def _private_error() -> web.Response:
    # The real Hub does not tell a stranger that a private repository exists.
    return _error(401, "Invalid username or password.", code="RepoNotFound")


def _sibling(model: FakeModel, name: str) -> dict[str, Any]:
    blob = model.blob(name) if model.contents is not None else None
    if blob is not None:
        return {"rfilename": name, **blob}
    # Repositories without `contents` keep their old answer: a config's real size, else 1 byte.
    return {"rfilename": name, "size": len(model.config_bytes() or b"") if name == "config.json" else 1}


def _content_type(path: str) -> str:
    if path.endswith(".json"):
        return "application/json"
    if path.endswith(".md"):
        return "text/plain"
    return "application/octet-stream"


def _error(status: int, message: str, *, code: str | None = None) -> web.Response:
    headers = {"X-Error-Message": message}
    if code is not None:
        headers["X-Error-Code"] = code
    return web.json_response({"error": message}, status=status, headers=headers)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    """The models `fake_hub` starts with; override this fixture for another corpus."""
    return make_corpus(250)


@pytest.fixture
def fake_hub(fake_hub_corpus: list[FakeModel]) -> Iterator[FakeHub]:
    """A running fake Hub over `fake_hub_corpus`, stopped after the test."""
    with FakeHub(fake_hub_corpus) as hub:
        yield hub
