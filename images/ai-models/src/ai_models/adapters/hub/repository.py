"""One Hugging Face repository at one commit: what it holds, and its files as byte streams.

The controller calls `repository_snapshot` to pin a revision to a commit and to choose the files
before it creates a publication Job; the publisher calls it again for the profile facts and then
`open_file` for each chosen file. Both use huggingface_hub's shared HTTP session, its headers
(`build_hf_headers(token=False)` when no token is given, so a token lying around on the machine
is never sent) and its error classification, like `HubClient`.

    hub = HubRepository(endpoint="https://huggingface.co", token=None)
    snapshot = hub.repository_snapshot("Qwen/Qwen2.5-0.5B", "main")
    with hub.open_file("Qwen/Qwen2.5-0.5B", snapshot.sha, "config.json") as remote:
        data = remote.read(65536)

Downloads follow redirects as the Hub issues them: large (LFS) files are redirected to a CDN on
another host with a signed URL, and the `Authorization` header is dropped whenever a redirect
leaves the origin it was sent to, so the token never reaches a third party. Every failure is a
`ProviderError` whose message names the repository, the revision and (for downloads) the file,
and says what the owner of the Model can change.
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
from huggingface_hub.errors import HfHubHTTPError

# Public names hidden from strict mypy by the lazy `huggingface_hub.utils` facade (see client.py).
from huggingface_hub.utils import (  # type: ignore[attr-defined]
    build_hf_headers,
    get_session,
    hf_raise_for_status,
    http_backoff,
)

from ai_models import __version__
from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderForbidden,
    ProviderInvalidResponse,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
    retry_after_seconds,
)
from ai_models.adapters.hub.listing import parse_model
from ai_models.adapters.hub.text import one_line, origin
from ai_models.domain.artifacts.digest import SourceFile
from ai_models.domain.catalog.record import Gated
from ai_models.domain.models.source import revision_problem

logger = logging.getLogger(__name__)

TOKEN_HINT: Final = (
    "check the Secret in spec.source.authSecretRef (key token, HF_TOKEN or HUGGING_FACE_HUB_TOKEN): "
    "it must hold a Hugging Face token whose user may read the repository"
)
MAX_REDIRECTS: Final = 5
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_RETRY_STATUSES: Final = (500, 502, 503, 504)
# Error bodies are a line of JSON; anything bigger is not worth reading for a message.
_MAX_ERROR_BODY: Final = 64 * 1024
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

    def __init__(self, response: httpx2.Response, *, describe: Callable[[Exception], ProviderError]) -> None:
        # Pieces as they come off the connection: re-chunking them would copy every byte twice
        # more, and the store's reader gathers them into its own buffer (see `readinto`).
        self._chunks = response.iter_bytes()
        self._pending = b""
        self._describe = describe
        length = response.headers.get("Content-Length")
        # A decoded body (Content-Encoding) has another length than the header states.
        encoded = response.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
        self.size: int | None = int(length) if length and length.isdigit() and not encoded else None
        self.url = str(response.url)

    def read(self, size: int = -1, /) -> bytes:
        if self._pending:
            data = self._pending if size < 0 else self._pending[:size]
            self._pending = self._pending[len(data) :]
            return data
        try:
            chunk = next(self._chunks, b"")
        except httpx2.HTTPError as error:
            raise self._describe(error) from error
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
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
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
        try:
            response = http_backoff(
                "GET",
                url,
                params={"blobs": "true"},
                headers=self._headers,
                timeout=self._timeout,
                max_retries=self._max_retries,
                base_wait_time=self._retry_wait,
                max_wait_time=max(self._retry_wait, 4 * self._retry_wait),
                retry_on_status_codes=_RETRY_STATUSES,
            )
            hf_raise_for_status(response)
        except HfHubHTTPError as error:
            raise self._http_error(error.response, error.server_message, what=where) from error
        except httpx2.HTTPError as error:
            raise self._unreachable(error, what=where) from error
        try:
            info = json.loads(response.content)
        except ValueError:
            info = None
        snapshot = _snapshot(repository, info) if isinstance(info, dict) else None
        if snapshot is None:
            raise ProviderInvalidResponse(
                f"{self._endpoint} answered the model info of {where} with something that is not a Hub "
                "model description (no commit sha): check that the endpoint is a Hugging Face Hub or a "
                "mirror of its API, not a web page or a proxy's login page",
                endpoint=self._endpoint,
                status=response.status_code,
            )
        logger.debug(
            "repository snapshot read",
            extra={"repository": repository, "revision": revision, "commit": snapshot.sha},
        )
        return snapshot

    @contextlib.contextmanager
    def open_file(self, repository: str, revision: str, path: str) -> Iterator[RemoteFile]:
        """Stream `path` of `repository` at `revision`; the connection closes with the block."""
        what = f"{path} of {repository} at revision {revision}"
        url = (
            f"{self._endpoint}/{_quote_repo(repository)}/resolve/{_quote_revision(revision)}/"
            f"{urllib.parse.quote(path, safe='/')}"
        )
        response = self._follow(url, what=what)
        try:
            yield RemoteFile(response, describe=lambda error: self._unreachable(error, what=what))
        finally:
            response.close()

    def _follow(self, url: str, *, what: str) -> httpx2.Response:
        """The final answer for `url`, redirects followed by hand to keep the token on its origin."""
        headers = dict(self._headers)
        session = get_session()
        for _hop in range(MAX_REDIRECTS + 1):
            request = session.build_request("GET", url, headers=headers, timeout=self._download_timeout)
            try:
                response = session.send(request, stream=True, follow_redirects=False)
            except httpx2.HTTPError as error:
                raise self._unreachable(error, what=what) from error
            if response.status_code in _REDIRECTS and "Location" in response.headers:
                target = urllib.parse.urljoin(url, response.headers["Location"])
                response.close()
                if origin(target) != origin(url):
                    headers = {key: value for key, value in headers.items() if key.lower() != "authorization"}
                url = target
                continue
            if response.status_code >= 400:
                self._raise_for(response, what=what)
            return response
        raise ProviderInvalidResponse(
            f"{self._endpoint} redirected the download of {what} more than {MAX_REDIRECTS} times: check "
            "the endpoint (a mirror or proxy may loop)",
            endpoint=self._endpoint,
        )

    def _raise_for(self, response: httpx2.Response, *, what: str) -> None:
        message = response.headers.get("X-Error-Message")
        try:
            length = int(response.headers.get("Content-Length") or 0)
            if message is None and length <= _MAX_ERROR_BODY:
                body = json.loads(response.read())
                found = body.get("error") if isinstance(body, dict) else None
                message = found if isinstance(found, str) else None
        except (httpx2.HTTPError, ValueError):
            pass  # the status says enough
        finally:
            response.close()
        raise self._http_error(response, message, what=what)

    def _http_error(
        self, response: httpx2.Response, server_message: str | None, *, what: str
    ) -> ProviderError:
        status = response.status_code
        code = response.headers.get("X-Error-Code", "")
        detail = f" ({one_line(server_message)})" if server_message else ""
        where = self._endpoint
        if status == 401:
            if code == "GatedRepo":
                cause = "is gated: its terms must be accepted on the Hub by a user whose token the Model uses"
            elif self._authenticated:
                cause = "was refused with the given token (invalid, expired, or without access to it)"
            else:
                cause = "needs a token: it is private or gated (or does not exist), and no token was given"
            return ProviderUnauthorized(
                f"{where}: {what} {cause} (HTTP 401){detail}; {TOKEN_HINT}", endpoint=where, status=status
            )
        if status == 403:
            return ProviderForbidden(
                f"{where}: the token may not read {what} (HTTP 403){detail}: for a gated repository the "
                f"token's user must accept its terms on the Hub; {TOKEN_HINT}",
                endpoint=where,
                status=status,
            )
        if status == 404:
            return ProviderNotFound(
                f"{where}: {_not_found(code, what)} (HTTP 404){detail}", endpoint=where, status=status
            )
        if status == 429:
            wait = retry_after_seconds(response.headers, now=self._clock())
            return ProviderRateLimited(
                f"{where} rate-limited the request for {what} (HTTP 429), retry in {wait}s: a token in "
                "spec.source.authSecretRef raises the Hub's limits",
                endpoint=where,
                retry_after=wait,
            )
        if status >= 500:
            return ProviderUnavailable(
                f"{where} failed with HTTP {status} for {what}{detail}: the Hub or mirror is having "
                "trouble; the publication is retried",
                endpoint=where,
                status=status,
            )
        return ProviderRequestRejected(
            f"{where} rejected the request for {what} (HTTP {status}){detail}: check the repository "
            "and revision in spec.source.url",
            endpoint=where,
            status=status,
        )

    def _unreachable(self, error: Exception, *, what: str) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"{self._endpoint} is unreachable while reading {what} ({type(error).__name__}: {error}): "
            "check the network path from the module to the Hub (DNS, egress, proxy); the publication "
            "is retried",
            endpoint=self._endpoint,
        )


def repository_snapshot(
    repository: str, revision: str, *, endpoint: str, token: str | None
) -> RepositorySnapshot:
    """`HubRepository(endpoint=..., token=...).repository_snapshot(repository, revision)`."""
    return HubRepository(endpoint=endpoint, token=token).repository_snapshot(repository, revision)


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
