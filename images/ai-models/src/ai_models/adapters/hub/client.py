"""Hugging Face Hub client for catalog indexing: listing pages, config.json and file-list sizes.

Headers and next-link handling come from `huggingface_hub` (`build_hf_headers`,
`fix_hf_endpoint_in_url`); requests go through `http.Sender`, which keeps them on the endpoint's
origin, refuses metadata and (unless allowed) link-local addresses, caps and times every body,
and retries momentary failures. Pages are requested by hand rather than through
`HfApi.list_models`, because the pass must checkpoint the Hub's `Link` cursor, which
`list_models` keeps to itself.

Rate limits are not slept through here: a 429 becomes `ProviderRateLimited` with the wait the Hub
asked for, and the controller resumes the pass from its checkpoint after that wait. Server errors
and broken connections are retried a few times first, because they are usually momentary.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Final

import httpx2

# The public `huggingface_hub.utils` facade is lazy and lists these only under TYPE_CHECKING
# without `as`, which strict mypy does not count as a re-export; the names and types are public.
from huggingface_hub.utils import (  # type: ignore[attr-defined]
    build_hf_headers,
    fix_hf_endpoint_in_url,
)

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
from ai_models.adapters.hub.listing import HubModel, HubPage, HubQuery, parse_model
from ai_models.adapters.hub.repository import (
    MAX_MODEL_INFO_BYTES,
    MODEL_INFO_DEADLINE_SECONDS,
    REDIRECTS,
    parse_snapshot,
)
from ai_models.adapters.hub.text import origin
from ai_models.domain.artifacts.sizing import publication_bytes
from ai_models.domain.catalog.config_view import MAX_FACT

logger = logging.getLogger(__name__)

DEFAULT_CONFIG_CONCURRENCY: Final = 16
# A config.json is a few kilobytes; anything this large is not a model config.
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
# A Hub page of 1,000 expanded models (the largest chunkSize) is a few megabytes; a body past this
# is not a listing, and reading it would cost the controller its memory limit.
MAX_LISTING_PAGE_BYTES: Final = 16 * 1024 * 1024
# However slowly an endpoint answers, one page (or config) is given up after this long.
LISTING_DEADLINE_SECONDS: Final = 120.0
CONFIG_DEADLINE_SECONDS: Final = 60.0
_TOKEN_HINT: Final = "check the Secret in spec.huggingFace.tokenSecretRef (key `token`)"


class HubClient:
    """One Hub endpoint with one token; thread-safe, and shares one HTTP session across threads."""

    def __init__(
        self,
        *,
        endpoint: str,
        token: str | None,
        config_concurrency: int = DEFAULT_CONFIG_CONCURRENCY,
        timeout: float = 30.0,
        max_retries: int = 2,
        retry_wait: float = 0.5,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        policy: EndpointPolicy | None = None,
        listing_deadline: float = LISTING_DEADLINE_SECONDS,
    ) -> None:
        if config_concurrency < 1:
            raise ValueError("config_concurrency must be at least 1")
        self._endpoint = endpoint.rstrip("/")
        self._origin = origin(self._endpoint)
        # token=False keeps huggingface_hub from sending a token it finds on the machine (HF_TOKEN,
        # the login cache): a source without tokenSecretRef is anonymous.
        self._headers = build_hf_headers(
            token=token or False, library_name="ai-models", library_version=__version__
        )
        self._concurrency = config_concurrency
        self._timeout = httpx2.Timeout(timeout, connect=min(timeout, 10.0))
        self._max_retries = max_retries
        self._retry_wait = retry_wait
        self._clock = clock
        self._sender = Sender(policy)
        self._listing_deadline = listing_deadline
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def list_page(self, query: HubQuery, cursor: str | None) -> HubPage:
        """The first page of `query` (cursor None) or the page a previous `next_cursor` points at."""
        if cursor is None:
            url, params = f"{self._endpoint}/api/models", query.params()
        else:
            url, params = self._own_url(cursor), None
        answer = self._get(
            url,
            params=params,
            max_bytes=MAX_LISTING_PAGE_BYTES,
            deadline=self._listing_deadline,
            what="listing",
        )
        if answer.status >= 400:
            raise self._http_error(answer)
        items = _json(answer.body)
        if not isinstance(items, list):
            raise ProviderInvalidResponse(
                f"{self._endpoint}/api/models did not answer with a JSON list of models: "
                "check that spec.huggingFace.endpoint is a Hugging Face Hub (or a mirror of its API), "
                "not a web page or a proxy's login page",
                endpoint=self._endpoint,
                status=answer.status,
            )
        models = [model for model in map(parse_model, items) if model is not None]
        if len(models) != len(items):
            logger.warning(
                "Hub listing had entries without a model id; they are skipped",
                extra={"endpoint": self._endpoint, "skipped": len(items) - len(models)},
            )
        next_url = answer.next_link
        next_cursor = self._own_url(urllib.parse.urljoin(answer.url, next_url)) if next_url else None
        logger.debug(
            "Hub listing page fetched",
            extra={"endpoint": self._endpoint, "models": len(models), "last_page": next_cursor is None},
        )
        return HubPage(models=tuple(models), next_cursor=next_cursor)

    def fetch_config(self, model_id: str, sha: str) -> Mapping[str, Any] | None:
        """`config.json` of the model at commit `sha`; None when there is none or it is not a JSON object.

        A gated or private file the token cannot read is also None: the record keeps the facts
        the listing gives. Rate limits and outages still raise, because they are not about the model.
        """
        if not _plain_segments(model_id, sha):
            return None  # a listed id or sha an HTTP client would rewrite names no config we can ask for
        path = urllib.parse.quote(f"{model_id}/resolve/{sha}/config.json", safe="/")
        try:
            answer = self._get(
                f"{self._endpoint}/{path}",
                params=None,
                max_bytes=MAX_CONFIG_BYTES,
                deadline=CONFIG_DEADLINE_SECONDS,
                what=f"config.json of {model_id}",
                raise_too_large=False,
            )
        except _NotAConfig:
            return None
        if answer.status >= 400:
            if answer.status == 429 or answer.status >= 500:
                raise self._http_error(answer)
            # 401/403 (gated or private), 404 (no such file) and other refusals are about this
            # model only.
            logger.debug(
                "config.json not readable",
                extra={"endpoint": self._endpoint, "model": model_id, "status": answer.status},
            )
            return None
        config = _json(answer.body)
        return config if isinstance(config, Mapping) else None

    def fetch_configs(self, models: Sequence[HubModel]) -> dict[str, Mapping[str, Any] | None]:
        """`fetch_config` for each (id, sha) at once, at most `config_concurrency` in flight.

        The first provider error cancels what has not started and is raised; the page is then
        retried as a whole when the pass resumes.
        """
        wanted = [model for model in models if model.sha is not None]
        if not wanted:
            return {}
        pool = self._executor()
        futures = {model.id: pool.submit(self.fetch_config, model.id, model.sha or "") for model in wanted}
        try:
            return {model_id: future.result() for model_id, future in futures.items()}
        finally:
            _cancel(futures.values())

    def fetch_size(self, model_id: str, sha: str) -> int | None:
        """The bytes a publication of the model at commit `sha` reserves, from one file-list request.

        The request is the controller's own (`/api/models/{id}/revision/{sha}?blobs=true`), read
        by the same parser and summed over the same file selection, so the number is the
        reservation a Model from this entry makes (D131). None when the Hub does not tell: no such
        file list, a refused or odd answer, a selected file without a size, nothing publishable.
        Rate limits and outages raise, as for config.json.
        """
        if not _plain_segments(model_id, sha):
            return None
        path = urllib.parse.quote(f"api/models/{model_id}/revision/", safe="/")
        try:
            answer = self._get(
                f"{self._endpoint}/{path}{urllib.parse.quote(sha, safe='')}",
                params=[("blobs", "true")],
                max_bytes=MAX_MODEL_INFO_BYTES,
                deadline=MODEL_INFO_DEADLINE_SECONDS,
                what=f"file list of {model_id}",
                raise_too_large=False,
            )
        except _NotAConfig:
            return None
        if answer.status >= 400 or answer.status in REDIRECTS:
            if answer.status == 429 or answer.status >= 500:
                raise self._http_error(answer)
            logger.debug(
                "file list not readable",
                extra={"endpoint": self._endpoint, "model": model_id, "status": answer.status},
            )
            return None
        info = _json(answer.body)
        snapshot = parse_snapshot(model_id, info) if isinstance(info, dict) else None
        if snapshot is None or snapshot.sha != sha:
            return None  # not the commit the record describes: its size would describe other files
        size = publication_bytes(snapshot.files)
        return size if size is not None and size <= MAX_FACT else None

    def fetch_sizes(self, models: Sequence[HubModel]) -> dict[str, int | None]:
        """`fetch_size` for each (id, sha) at once, sharing the config threads; like
        `fetch_configs`, the first provider error cancels the rest and is raised."""
        wanted = [model for model in models if model.sha is not None]
        if not wanted:
            return {}
        pool = self._executor()
        futures = {model.id: pool.submit(self.fetch_size, model.id, model.sha or "") for model in wanted}
        try:
            return {model_id: future.result() for model_id, future in futures.items()}
        finally:
            _cancel(futures.values())

    def close(self) -> None:
        """Stop the config threads; the HTTP client of `adapters.hub.http` is shared and stays open."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> HubClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self._concurrency, thread_name_prefix="hub-config"
                )
            return self._pool

    def _get(
        self,
        url: str,
        *,
        params: list[tuple[str, str]] | None,
        max_bytes: int,
        deadline: float,
        what: str,
        raise_too_large: bool = True,
    ) -> Answer:
        request = Request(
            url=url,
            params=params,
            headers=self._headers,
            timeout=self._timeout,
            max_retries=self._max_retries,
            retry_wait=self._retry_wait,
        )
        try:
            return self._sender.get(request, max_bytes=max_bytes, deadline=deadline)
        except AddressRefused as problem:
            raise ProviderEndpointRefused(
                f"{self._endpoint} was not contacted for the {what}: {problem}; point "
                "spec.huggingFace.endpoint (or the module setting sources.huggingFace.endpoint) at the "
                "Hub or a mirror on an ordinary address",
                endpoint=self._endpoint,
            ) from problem
        except BodyTooSlow as problem:
            raise ProviderUnavailable(
                f"{self._endpoint} was too slow with the {what}: {problem}; the pass resumes from its "
                "checkpoint; if it persists, check the endpoint and the network path to it",
                endpoint=self._endpoint,
            ) from problem
        except BodyTooLarge as problem:
            if not raise_too_large:
                raise _NotAConfig from problem
            raise ProviderInvalidResponse(
                f"{self._endpoint} sent a {what} that is too large: {problem}; a Hub page of "
                "spec.chunkSize models is far smaller: check that spec.huggingFace.endpoint is a Hub API, "
                "or lower spec.chunkSize",
                endpoint=self._endpoint,
            ) from problem
        except EndpointProblem as problem:
            if not raise_too_large:
                raise _NotAConfig from problem
            raise ProviderInvalidResponse(
                f"{self._endpoint} was not followed for the {what}: {problem}; point "
                "spec.huggingFace.endpoint at the host that serves the Hub API",
                endpoint=self._endpoint,
            ) from problem
        except httpx2.HTTPError as error:  # transport errors, and bodies that do not decode
            raise self._unreachable(error) from error

    def _own_url(self, url: str) -> str:
        """A next-page URL on this endpoint. A Link to another host is refused: the token stays here."""
        fixed = fix_hf_endpoint_in_url(url, self._endpoint)
        if origin(fixed) != self._origin:
            raise ProviderInvalidResponse(
                f"{self._endpoint} sent a next-page link to another host, port or scheme; "
                "the catalog only follows links on spec.huggingFace.endpoint: point it at the host "
                "the Hub API links to",
                endpoint=self._endpoint,
            )
        return fixed

    def _http_error(self, answer: Answer) -> ProviderError:
        status = answer.status
        code = error_code(answer.headers)
        # The status and a plain provider code only: the body and X-Error-Message are the remote's
        # words, and status is read by every User.
        detail = f" (provider code {code})" if code else ""
        where = self._endpoint
        wait = retry_after_seconds(answer.headers, now=self._clock())
        return refusal(
            status,
            endpoint=where,
            retry_after=wait,
            says=Refusals(
                unauthorized=f"{where} refused the request as unauthenticated (HTTP 401){detail}: "
                f"the token is missing or invalid; {_TOKEN_HINT}",
                forbidden=f"{where} denied access (HTTP 403){detail}: the token may not read this listing; "
                f"{_TOKEN_HINT}, or remove the filters that need it",
                not_found=f"{where} has no model listing at /api/models (HTTP 404){detail}: "
                "check spec.huggingFace.endpoint (a Hugging Face Hub or a mirror of its API)",
                rate_limited=f"{where} rate-limited the catalog (HTTP 429), retry in {wait}s: the pass "
                "resumes from its checkpoint; to stay under the quota lower maxModels, sync less often "
                "(spec.syncInterval) or set a token in spec.huggingFace.tokenSecretRef",
                unavailable=f"{where} failed with HTTP {status}{detail}: the pass resumes from its "
                "checkpoint; if it persists, check spec.huggingFace.endpoint and the Hub's status",
                redirect=f"{where} answered the listing with a redirect (HTTP {status}) that was not "
                "followed: point spec.huggingFace.endpoint at the host that serves the Hub API",
                rejected=f"{where} rejected the listing query (HTTP {status}){detail}: check the filters "
                "in spec.huggingFace (authors, search, pipelineTags, libraries, tags)",
            ),
        )

    def _unreachable(self, error: httpx2.HTTPError) -> ProviderUnavailable:
        # The error's type only: its text may quote what the remote sent (a malformed status line).
        return ProviderUnavailable(
            f"{self._endpoint} is unreachable or broke off its answer ({type(error).__name__}): the pass "
            "resumes from its checkpoint; check spec.huggingFace.endpoint and the network path from the "
            "module (DNS, egress, proxy)",
            endpoint=self._endpoint,
        )


class _NotAConfig(Exception):
    """A config answer that is no model config (too large, redirected away)."""


def _json(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:  # covers JSONDecodeError and undecodable bytes
        return None


def _plain_segments(*values: str) -> bool:
    return all(segment not in ("", ".", "..") for value in values for segment in value.split("/"))


def _cancel(futures: Iterable[Future[Any]]) -> None:
    for future in futures:
        future.cancel()
