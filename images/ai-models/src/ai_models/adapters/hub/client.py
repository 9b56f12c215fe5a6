"""Hugging Face Hub client for catalog indexing: listing pages and config.json, nothing else.

Transport, headers, retries of transient failures and error classification come from
`huggingface_hub` (its shared HTTP session, `http_backoff`, `build_hf_headers`,
`hf_raise_for_status`). Pages are requested by hand rather than through `HfApi.list_models`,
because the pass must checkpoint the Hub's `Link` cursor, which `list_models` keeps to itself.

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
from huggingface_hub.errors import HfHubHTTPError

# The public `huggingface_hub.utils` facade is lazy and lists these only under TYPE_CHECKING
# without `as`, which strict mypy does not count as a re-export; the names and types are public.
from huggingface_hub.utils import (  # type: ignore[attr-defined]
    build_hf_headers,
    fix_hf_endpoint_in_url,
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
from ai_models.adapters.hub.listing import HubModel, HubPage, HubQuery, parse_model
from ai_models.adapters.hub.text import one_line, origin

logger = logging.getLogger(__name__)

DEFAULT_CONFIG_CONCURRENCY: Final = 16
# A config.json is a few kilobytes; anything this large is not a model config.
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
_RETRY_STATUSES: Final = (500, 502, 503, 504)
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
        try:
            response = self._get(url, params=params)
        except HfHubHTTPError as error:
            raise self._http_error(error.response, error) from error
        except httpx2.HTTPError as error:
            raise self._unreachable(error) from error
        items = _json(response)
        if not isinstance(items, list):
            raise ProviderInvalidResponse(
                f"{self._endpoint}/api/models did not answer with a JSON list of models: "
                "check that spec.huggingFace.endpoint is a Hugging Face Hub (or a mirror of its API), "
                "not a web page or a proxy's login page",
                endpoint=self._endpoint,
                status=response.status_code,
            )
        models = [model for model in map(parse_model, items) if model is not None]
        if len(models) != len(items):
            logger.warning(
                "Hub listing had entries without a model id; they are skipped",
                extra={"endpoint": self._endpoint, "skipped": len(items) - len(models)},
            )
        next_url = response.links.get("next", {}).get("url")
        next_cursor = self._own_url(urllib.parse.urljoin(str(response.url), next_url)) if next_url else None
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
        path = urllib.parse.quote(f"{model_id}/resolve/{sha}/config.json", safe="/")
        try:
            response = self._get(f"{self._endpoint}/{path}", params=None)
        except HfHubHTTPError as error:
            status = error.response.status_code
            if status == 429 or status >= 500:
                raise self._http_error(error.response, error) from error
            # 401/403 (gated or private), 404 (no such file) and other refusals are about this
            # model only.
            logger.debug(
                "config.json not readable",
                extra={"endpoint": self._endpoint, "model": model_id, "status": status},
            )
            return None
        except httpx2.HTTPError as error:
            raise self._unreachable(error) from error
        if len(response.content) > MAX_CONFIG_BYTES:
            return None
        config = _json(response)
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

    def close(self) -> None:
        """Stop the config threads. The HTTP session is huggingface_hub's and stays open for others."""
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

    def _get(self, url: str, *, params: list[tuple[str, str]] | None) -> httpx2.Response:
        response = http_backoff(
            "GET",
            url,
            params=params,
            headers=self._headers,
            timeout=self._timeout,
            max_retries=self._max_retries,
            base_wait_time=self._retry_wait,
            max_wait_time=max(self._retry_wait, 4 * self._retry_wait),
            retry_on_status_codes=_RETRY_STATUSES,
        )
        hf_raise_for_status(response)
        return response

    def _own_url(self, url: str) -> str:
        """A next-page URL on this endpoint. A Link to another host is refused: the token stays here."""
        fixed = fix_hf_endpoint_in_url(url, self._endpoint)
        if origin(fixed) != self._origin:
            raise ProviderInvalidResponse(
                f"{self._endpoint} sent a next-page link to another host ({_origin_text(fixed)}); "
                "the catalog only follows links on spec.huggingFace.endpoint: point it at the host "
                "the Hub API links to",
                endpoint=self._endpoint,
            )
        return fixed

    def _http_error(self, response: httpx2.Response, error: HfHubHTTPError) -> ProviderError:
        status = response.status_code
        detail = f" ({one_line(error.server_message)})" if error.server_message else ""
        where = self._endpoint
        if status == 401:
            return ProviderUnauthorized(
                f"{where} refused the request as unauthenticated (HTTP 401){detail}: "
                f"the token is missing or invalid; {_TOKEN_HINT}",
                endpoint=where,
                status=status,
            )
        if status == 403:
            return ProviderForbidden(
                f"{where} denied access (HTTP 403){detail}: the token may not read this listing; "
                f"{_TOKEN_HINT}, or remove the filters that need it",
                endpoint=where,
                status=status,
            )
        if status == 404:
            return ProviderNotFound(
                f"{where} has no model listing at /api/models (HTTP 404){detail}: "
                "check spec.huggingFace.endpoint (a Hugging Face Hub or a mirror of its API)",
                endpoint=where,
                status=status,
            )
        if status == 429:
            wait = retry_after_seconds(response.headers, now=self._clock())
            return ProviderRateLimited(
                f"{where} rate-limited the catalog (HTTP 429), retry in {wait}s: the pass resumes from "
                "its checkpoint; to stay under the quota lower maxModels, sync less often "
                "(spec.syncInterval) or set a token in spec.huggingFace.tokenSecretRef",
                endpoint=where,
                retry_after=wait,
            )
        if status >= 500:
            return ProviderUnavailable(
                f"{where} failed with HTTP {status}{detail}: the pass resumes from its checkpoint; "
                "if it persists, check spec.huggingFace.endpoint and the Hub's status",
                endpoint=where,
                status=status,
            )
        return ProviderRequestRejected(
            f"{where} rejected the listing query (HTTP {status}){detail}: check the filters in "
            "spec.huggingFace (authors, search, pipelineTags, libraries, tags)",
            endpoint=where,
            status=status,
        )

    def _unreachable(self, error: httpx2.HTTPError) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"{self._endpoint} is unreachable ({type(error).__name__}: {error}): the pass resumes from "
            "its checkpoint; check spec.huggingFace.endpoint and the network path from the module "
            "(DNS, egress, proxy)",
            endpoint=self._endpoint,
        )


def _json(response: httpx2.Response) -> object:
    try:
        return json.loads(response.content)
    except ValueError:  # covers JSONDecodeError and undecodable bytes
        return None


def _origin_text(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    return f"{parsed.scheme}://{parsed.netloc}"


def _cancel(futures: Iterable[Future[Any]]) -> None:
    for future in futures:
        future.cancel()
