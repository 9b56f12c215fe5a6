"""One Hugging Face repository at one commit: what it holds, and its files as byte streams.

The controller calls `repository_snapshot` to pin a revision to a commit and to choose the files
before it creates a publication Job; the publisher calls it again for the profile facts and then
`open_file` for each chosen file. Requests go through `adapters.hub.http` (its endpoint policy:
addresses, redirects, body caps; D56), with huggingface_hub's headers (`build_hf_headers(token=False)`
when no token is given, so a token lying around on the machine is never sent), like `HubClient`.

    hub = HubRepository(endpoint="https://huggingface.co", token=None)
    snapshot = hub.repository_snapshot("Qwen/Qwen2.5-0.5B", "main")
    with hub.open_file("Qwen/Qwen2.5-0.5B", snapshot.sha, "config.json") as remote:
        data = remote.read(65536)

Requests go through `http.Sender`: metadata and (unless allowed) link-local addresses are
refused, the model description must come from the endpoint's own origin and is capped in size.
File downloads follow redirects as the Hub issues them (large LFS files go to a CDN on another
host with a signed URL), never from https to http, and the `Authorization` header is dropped
whenever a redirect leaves the origin it was sent to, so the token never reaches a third party;
a body longer than the size the listing gave is cut off. Every failure is a `ProviderError` whose
message names the repository, the revision and (for downloads) the file, and says what the owner
of the Model can change; nothing the remote wrote is repeated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import httpx2

# Public names hidden from strict mypy by the lazy `huggingface_hub.utils` facade (see client.py).
from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

from ai_models import __version__
from ai_models.adapters.hub.errors import (
    ProviderEndpointRefused,
    ProviderError,
    ProviderInvalidResponse,
    ProviderUnavailable,
    Refusals,
    refusal,
    retry_after_seconds,
)
from ai_models.adapters.hub.http import (
    AddressRefused,
    Answer,
    BodyTooLarge,
    BodyTooSlow,
    EndpointPolicy,
    EndpointProblem,
    Request,
    Sender,
    error_code,
)
from ai_models.adapters.hub.listing import parse_model
from ai_models.domain.artifacts.digest import SourceFile
from ai_models.domain.catalog.record import Gated
from ai_models.domain.models.source import revision_problem

logger = logging.getLogger(__name__)

TOKEN_HINT: Final = (
    "check the Secret in spec.source.authSecretRef (key token, HF_TOKEN or HUGGING_FACE_HUB_TOKEN): "
    "it must hold a Hugging Face token whose user may read the repository"
)
# A model description lists every file of the repository: a few hundred kilobytes for the largest.
MAX_MODEL_INFO_BYTES: Final = 16 * 1024 * 1024
MODEL_INFO_DEADLINE_SECONDS: Final = 120.0
_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")
_COMMIT: Final = re.compile(r"^[0-9a-f]{40}$")


@dataclasses.dataclass(frozen=True)
class RepositorySnapshot:
    """A repository at one commit, as `/api/models/{repo}/revision/{rev}?blobs=true` describes it."""

    repository: str
    sha: str  # the commit the revision pointed at
    files: tuple[SourceFile, ...]  # size, content id (LFS sha256 or git blob id), LFS sha256
    pipeline_tag: str | None = None
    tags: tuple[str, ...] = ()
    library_name: str | None = None
    gguf: Mapping[str, Any] | None = None
    config: Mapping[str, Any] | None = None  # the Hub's trimmed config (architectures, model_type)
    gated: Gated = Gated.NONE
    private: bool = False

    def file(self, path: str) -> SourceFile | None:
        for item in self.files:
            if item.path == path:
                return item
        return None


class RemoteFile:
    """An open download: `read(n)` gives the body in pieces; errors are ProviderErrors."""

    def __init__(
        self,
        response: httpx2.Response,
        *,
        describe: Callable[[Exception], ProviderError],
        limit: int | None = None,
        too_long: Callable[[int], ProviderError] | None = None,
    ) -> None:
        # Pieces as they come off the connection: re-chunking them would copy every byte twice
        # more, and the store's reader gathers them into its own buffer (see `readinto`).
        self._chunks = response.iter_bytes()
        self._pending = b""
        self._describe = describe
        self._limit = limit
        self._too_long = too_long
        self._received = 0
        length = response.headers.get("Content-Length")
        # A decoded body (Content-Encoding) has another length than the header states.
        encoded = response.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
        self.size: int | None = int(length) if length and length.isdigit() and not encoded else None
        self.url = str(response.url)
        if limit is not None and self.size is not None and self.size > limit:
            raise self._over(self.size)

    def _over(self, received: int) -> ProviderError:
        if self._too_long is None:
            raise AssertionError("a limit needs too_long")
        return self._too_long(received)

    def read(self, size: int = -1, /) -> bytes:
        if self._pending:
            data = self._pending if size < 0 else self._pending[:size]
            self._pending = self._pending[len(data) :]
            return data
        try:
            chunk = next(self._chunks, b"")
        except httpx2.HTTPError as error:
            raise self._describe(error) from error
        self._received += len(chunk)
        if self._limit is not None and self._received > self._limit:
            # More than the listing said: a body that never ends is not read to its end.
            raise self._over(self._received)
        if 0 <= size < len(chunk):
            self._pending = chunk[size:]
            return chunk[:size]
        return chunk

    def readinto(self, buffer: memoryview, /) -> int:
        """The next piece (or as much of it as fits) copied into `buffer`; 0 at the end."""
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class HubRepository:
    """Repository reads on one Hub endpoint (or mirror) with one token; thread-safe."""

    def __init__(
        self,
        *,
        endpoint: str,
        token: str | None,
        timeout: float = 30.0,
        read_timeout: float = 60.0,
        max_retries: int = 2,
        retry_wait: float = 0.5,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        policy: EndpointPolicy | None = None,
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._sender = Sender(policy)
        self._authenticated = bool(token)
        # token=False keeps huggingface_hub from sending a token it finds on the machine.
        self._headers: dict[str, str] = build_hf_headers(
            token=token or False, library_name="ai-models", library_version=__version__
        )
        self._timeout = httpx2.Timeout(timeout, connect=min(timeout, 10.0))
        self._download_timeout = httpx2.Timeout(read_timeout, connect=min(timeout, 10.0))
        self._max_retries = max_retries
        self._retry_wait = retry_wait
        self._clock = clock

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def repository_snapshot(self, repository: str, revision: str) -> RepositorySnapshot:
        """The repository at `revision` (branch, tag or commit): its commit, files and model facts.

        Raises ProviderNotFound (no such repository or revision), ProviderUnauthorized (private or
        gated, and no valid token), ProviderForbidden, ProviderRateLimited, ProviderUnavailable
        (5xx or unreachable, after a few retries), ProviderRequestRejected or
        ProviderInvalidResponse (the endpoint is not a Hub API).
        """
        url = f"{self._endpoint}/api/models/{_quote_repo(repository)}/revision/{_quote_revision(revision)}"
        where = f"{repository} at revision {revision}"
        request = Request(
            url=url,
            params=[("blobs", "true")],
            headers=self._headers,
            timeout=self._timeout,
            max_retries=self._max_retries,
            retry_wait=self._retry_wait,
        )
        try:
            answer = self._sender.get(
                request, max_bytes=MAX_MODEL_INFO_BYTES, deadline=MODEL_INFO_DEADLINE_SECONDS
            )
        except EndpointProblem as problem:
            raise self._refused(problem, what=where) from problem
        except httpx2.HTTPError as error:
            raise self._unreachable(error, what=where) from error
        if answer.status >= 400 or answer.status in REDIRECTS:
            raise self._http_error(answer, what=where)
        try:
            info = json.loads(answer.body)
        except ValueError:
            info = None
        snapshot = _snapshot(repository, info) if isinstance(info, dict) else None
        if snapshot is None:
            raise ProviderInvalidResponse(
                f"{self._endpoint} answered the model info of {where} with something that is not a Hub "
                "model description (no commit sha): check that the endpoint is a Hugging Face Hub or a "
                "mirror of its API, not a web page or a proxy's login page",
                endpoint=self._endpoint,
                status=answer.status,
            )
        logger.debug(
            "repository snapshot read",
            extra={"repository": repository, "revision": revision, "commit": snapshot.sha},
        )
        return snapshot

    @contextlib.contextmanager
    def open_file(
        self, repository: str, revision: str, path: str, *, size: int | None = None
    ) -> Iterator[RemoteFile]:
        """Stream `path` of `repository` at `revision`; the connection closes with the block.

        With `size` (what the listing says the file has), a body longer than that is cut off with
        ProviderInvalidResponse instead of being read to its end.
        """
        what = f"{path} of {repository} at revision {revision}"
        url = (
            f"{self._endpoint}/{_quote_repo(repository)}/resolve/{_quote_revision(revision)}/"
            f"{urllib.parse.quote(path, safe='/')}"
        )
        request = Request(
            url=url, headers=self._headers, timeout=self._download_timeout, other_hosts=True, max_retries=0
        )
        try:
            with self._sender.open(request) as response:
                if response.status_code >= 400 or response.status_code in REDIRECTS:
                    raise self._http_error(_head(response), what=what)
                yield RemoteFile(
                    response,
                    describe=lambda error: self._unreachable(error, what=what),
                    limit=size,
                    too_long=lambda received: self._too_long(what, size or 0, received),
                )
        except EndpointProblem as problem:
            raise self._refused(problem, what=what) from problem
        except httpx2.HTTPError as error:
            raise self._unreachable(error, what=what) from error

    def _too_long(self, what: str, size: int, received: int) -> ProviderInvalidResponse:
        return ProviderInvalidResponse(
            f"{self._endpoint} sent more of {what} than the {size} bytes the repository lists "
            f"(at least {received}): the download was stopped; the endpoint serves other content than "
            "it lists",
            endpoint=self._endpoint,
        )

    def _refused(self, problem: EndpointProblem, *, what: str) -> ProviderError:
        if isinstance(problem, AddressRefused):
            return ProviderEndpointRefused(
                f"{self._endpoint} was not contacted for {what}: {problem}; the admin points the module "
                "setting sources.huggingFace.endpoint at the Hub or a mirror on an ordinary address",
                endpoint=self._endpoint,
            )
        if isinstance(problem, BodyTooSlow):
            return ProviderUnavailable(
                f"{self._endpoint} was too slow with {what}: {problem}; the publication is retried",
                endpoint=self._endpoint,
            )
        if isinstance(problem, BodyTooLarge):
            return ProviderInvalidResponse(
                f"{self._endpoint} sent a description of {what} that is too large: {problem}; check that "
                "the endpoint is a Hugging Face Hub or a mirror of its API",
                endpoint=self._endpoint,
            )
        return ProviderInvalidResponse(
            f"{self._endpoint} was not followed for {what}: {problem}; check the endpoint (a mirror "
            "or proxy may redirect elsewhere)",
            endpoint=self._endpoint,
        )

    def _http_error(self, answer: Answer, *, what: str) -> ProviderError:
        status = answer.status
        code = error_code(answer.headers) or ""
        # The status and a plain provider code only: the body and X-Error-Message are the remote's
        # words, and a Model's status is read by every User of its namespace.
        detail = f" (provider code {code})" if code else ""
        where = self._endpoint
        if code == "GatedRepo":
            cause = "is gated: its terms must be accepted on the Hub by a user whose token the Model uses"
        elif self._authenticated:
            cause = "was refused with the given token (invalid, expired, or without access to it)"
        else:
            cause = "needs a token: it is private or gated (or does not exist), and no token was given"
        wait = retry_after_seconds(answer.headers, now=self._clock())
        return refusal(
            status,
            endpoint=where,
            retry_after=wait,
            says=Refusals(
                unauthorized=f"{where}: {what} {cause} (HTTP 401){detail}; {TOKEN_HINT}",
                forbidden=f"{where}: the token may not read {what} (HTTP 403){detail}: for a gated "
                f"repository the token's user must accept its terms on the Hub; {TOKEN_HINT}",
                not_found=f"{where}: {_not_found(code, what)} (HTTP 404){detail}",
                rate_limited=f"{where} rate-limited the request for {what} (HTTP 429), retry in {wait}s: "
                "a token in spec.source.authSecretRef raises the Hub's limits",
                unavailable=f"{where} failed with HTTP {status} for {what}{detail}: the Hub or mirror is "
                "having trouble; the publication is retried",
                redirect=f"{where} answered the request for {what} with a redirect (HTTP {status}) that is "
                "not followed: the model description must come from the endpoint itself; check the "
                "endpoint",
                rejected=f"{where} rejected the request for {what} (HTTP {status}){detail}: check the "
                "repository and revision in spec.source.url",
            ),
        )

    def _unreachable(self, error: Exception, *, what: str) -> ProviderUnavailable:
        # The error's type only: its text may quote what the remote sent.
        return ProviderUnavailable(
            f"{self._endpoint} is unreachable or broke off while reading {what} ({type(error).__name__}): "
            "check the network path from the module to the Hub (DNS, egress, proxy); the publication "
            "is retried",
            endpoint=self._endpoint,
        )


def repository_snapshot(
    repository: str, revision: str, *, endpoint: str, token: str | None, policy: EndpointPolicy | None = None
) -> RepositorySnapshot:
    """`HubRepository(endpoint=..., token=...).repository_snapshot(repository, revision)`."""
    return HubRepository(endpoint=endpoint, token=token, policy=policy).repository_snapshot(
        repository, revision
    )


REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


def _head(response: httpx2.Response) -> Answer:
    """An error answer's status and headers; its body is never read."""
    return Answer(response.status_code, response.headers, str(response.url), b"")


def _not_found(code: str, what: str) -> str:
    # `what` reads "<file> of <repo> at revision <rev>" or "<repo> at revision <rev>".
    if code == "RevisionNotFound":
        return f"{what}: the revision does not exist (check ?revision= in spec.source.url)"
    if code == "EntryNotFound":
        return f"{what}: the file does not exist at that revision"
    if code == "RepoNotFound":
        return (
            f"{what}: the repository does not exist, or it is private and the token cannot see it "
            "(check spec.source.url and spec.source.authSecretRef)"
        )
    return f"{what} was not found (check spec.source.url)"


def parse_snapshot(repository: str, info: dict[str, Any]) -> RepositorySnapshot | None:
    """A decoded `/api/models/{repo}/revision/{rev}?blobs=true` answer as a snapshot; None when it
    names no commit. The catalog's size requests read the same answer the same way (D131)."""
    return _snapshot(repository, info)


def _snapshot(repository: str, info: dict[str, Any]) -> RepositorySnapshot | None:
    model = parse_model({**info, "id": info.get("id") or repository})
    if model is None or model.sha is None or not _COMMIT.match(model.sha):
        return None
    siblings = info.get("siblings")
    files = tuple(
        item for item in map(_source_file, siblings if isinstance(siblings, list) else []) if item is not None
    )
    return RepositorySnapshot(
        repository=repository,
        sha=model.sha,
        files=files,
        pipeline_tag=model.pipeline_tag,
        tags=model.tags,
        library_name=model.library_name,
        gguf=model.gguf,
        config=model.listing_config,
        gated=model.gated,
        private=info.get("private") is True,
    )


def _source_file(entry: object) -> SourceFile | None:
    if not isinstance(entry, dict):
        return None
    path = entry.get("rfilename")
    if not isinstance(path, str) or not path:
        return None
    lfs = entry.get("lfs")
    lfs_sha = lfs.get("sha256") if isinstance(lfs, dict) else None
    lfs_sha = lfs_sha.lower() if isinstance(lfs_sha, str) and _SHA256.match(lfs_sha.lower()) else None
    size = lfs.get("size") if isinstance(lfs, dict) and lfs_sha else entry.get("size")
    blob_id = entry.get("blobId")
    return SourceFile(
        path=path,
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        content_id=lfs_sha or (blob_id if isinstance(blob_id, str) and blob_id else None),
        lfs_sha256=lfs_sha,
    )


def _quote_repo(repository: str) -> str:
    return urllib.parse.quote(repository, safe="/")


def _quote_revision(revision: str) -> str:
    """The revision as one path segment. Branch names may contain `/` (refs/pr/1); the Hub wants
    them as one encoded segment. A `.` or `..` would be removed by the client's path normalization
    (and the Hub would answer for the default branch), so it is refused, not sent."""
    problem = revision_problem(revision)
    if problem is not None:
        raise ValueError(f"revision {revision!r} {problem}")
    return urllib.parse.quote(revision, safe="")
