"""Another ai-models cluster's listing of Ready ClusterModels (`GET /api/serving/v1/clustermodels`),
as an `AIModels` catalog source reads it: one page at a time, with the source's token and CA bundle.

Requests go out like the Hub's (adapters.hub.http): the URL's host and the address each connection
reaches are checked against the process's `EndpointPolicy` (never a cloud metadata address), the
cluster's egress proxy is used as httpx reads it, no redirect is followed (the token stays on the
endpoint it was given for), and an answer is read within a size and a time bound. Every failure
is a `ProviderError` with our own words only, so the source's conditions say what to fix and never
what the remote sent.

Items are read leniently: a field this cluster does not know (a newer remote) is dropped, and an
item that cannot be read (a name or digest that is not one) is left out and counted, so one odd
item never blocks the rest of the catalog.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import re
import ssl
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

import httpx2

from ai_models.adapters.hub.errors import (
    ProviderEndpointRefused,
    ProviderError,
    ProviderInvalidResponse,
    ProviderUnavailable,
    Refusals,
    refusal,
    retry_after_seconds,
)
from ai_models.adapters.hub.http import AddressRefused, EndpointPolicy, default_policy, peer_check
from ai_models.names import SERVING_API_PREFIX

logger = logging.getLogger(__name__)

LISTING_PATH: Final = f"{SERVING_API_PREFIX}/clustermodels"
# A page of 500 items with full profiles is well under 1 MiB; 16 MiB leaves room, bounds a liar.
MAX_PAGE_BYTES: Final = 16 * 1024 * 1024
PAGE_DEADLINE_SECONDS: Final = 120.0
NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_NAME: Final = 253
TOKEN_HINT: Final = (
    "put a token that cluster accepts into the Secret named in spec.aiModels.tokenSecretRef (key `token`)"
)


@dataclasses.dataclass(frozen=True)
class RemoteClusterModel:
    """One Ready ClusterModel of the other cluster, as its listing says."""

    name: str
    digest: str
    size_bytes: int
    revision: str | None = None
    resolved: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RemotePage:
    items: tuple[RemoteClusterModel, ...]
    next_page_token: str | None
    skipped: int = 0  # items that could not be read


def ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    """The context a source's requests check the remote's certificate with: `caBundle` (PEM) when
    set, else the system's CAs. Raises ValueError when the bundle holds no usable certificate."""
    try:
        return ssl.create_default_context(cadata=ca_bundle) if ca_bundle else ssl.create_default_context()
    except ssl.SSLError as error:
        raise ValueError(
            f"spec.aiModels.caBundle is not a PEM bundle of CA certificates ({error.reason})"
        ) from error


class ServingListingClient:
    """The listing of one remote serving API with one token; one kept-alive connection."""

    def __init__(
        self,
        *,
        endpoint: str,
        token: str,
        ca_bundle: str | None = None,
        timeout: float = 30.0,
        policy: EndpointPolicy | None = None,
        page_deadline: float = PAGE_DEADLINE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._policy = policy if policy is not None else default_policy()
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._timeout = httpx2.Timeout(timeout, connect=min(timeout, 10.0))
        self._deadline = page_deadline
        self._clock = clock
        self._now = now
        try:
            verify = ssl_context(ca_bundle)
        except ValueError as error:
            raise ProviderEndpointRefused(str(error) + "; fix the bundle", endpoint=self.endpoint) from error
        self._client = httpx2.Client(follow_redirects=False, timeout=None, verify=verify)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ServingListingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def list_page(self, page_token: str | None, page_size: int) -> RemotePage:
        """The page after `page_token` (None: the first one) of at most `page_size` ClusterModels."""
        url = self.endpoint + LISTING_PATH
        problem = self._policy.url_problem(url)
        if problem is not None:
            raise ProviderEndpointRefused(
                f"{self.endpoint} was not contacted: the URL {problem}; point spec.aiModels.endpoint at "
                "the other cluster's public serving API on an ordinary address",
                endpoint=self.endpoint,
            )
        params: list[tuple[str, str]] = [("pageSize", str(page_size))]
        if page_token is not None:
            params.append(("pageToken", page_token))
        body = self._get(url, params)
        return self._page(body)

    def _get(self, url: str, params: list[tuple[str, str]]) -> bytes:
        request = self._client.build_request(
            "GET", url, params=httpx2.QueryParams(tuple(params)), headers=self._headers, timeout=self._timeout
        )
        request.extensions["trace"] = peer_check(self._policy)
        try:
            response = self._client.send(request, stream=True)
        except AddressRefused as refused:
            raise ProviderEndpointRefused(
                f"{self.endpoint} was not contacted: {refused}; point "
                "spec.aiModels.endpoint at the other cluster's public serving API on an ordinary address",
                endpoint=self.endpoint,
            ) from None
        except httpx2.HTTPError as error:
            raise self._unreachable(error) from error
        try:
            if response.status_code != 200:
                raise self._refused(response)
            return self._read(response)
        finally:
            response.close()

    def _read(self, response: httpx2.Response) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > MAX_PAGE_BYTES:
            raise self._invalid(f"a page of {int(declared)} bytes, more than the {MAX_PAGE_BYTES} allowed")
        until = self._clock() + self._deadline
        body = bytearray()
        try:
            for piece in response.iter_bytes():
                body += piece
                if len(body) > MAX_PAGE_BYTES:
                    raise self._invalid(f"a page larger than the {MAX_PAGE_BYTES} bytes allowed")
                if self._clock() > until:
                    raise ProviderUnavailable(
                        f"{self.endpoint} took longer than {self._deadline:g}s to send a page of its "
                        "ClusterModel listing; the pass resumes from its checkpoint",
                        endpoint=self.endpoint,
                    )
        except httpx2.HTTPError as error:
            raise self._unreachable(error) from error
        return bytes(body)

    def _page(self, body: bytes) -> RemotePage:
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        items = document.get("items") if isinstance(document, dict) else None
        token = document.get("nextPageToken") if isinstance(document, dict) else None
        if not isinstance(items, list) or not (token is None or (isinstance(token, str) and token)):
            raise self._invalid("an answer that is not a page of the ClusterModel listing")
        read = [_item(item) for item in items]
        kept = tuple(item for item in read if item is not None)
        if len(kept) < len(read):
            logger.warning(
                "items of a remote ClusterModel listing could not be read and are left out",
                extra={"endpoint": self.endpoint, "skipped": len(read) - len(kept)},
            )
        return RemotePage(items=kept, next_page_token=token, skipped=len(read) - len(kept))

    def _refused(self, response: httpx2.Response) -> ProviderError:
        status = response.status_code
        where = self.endpoint
        wait = retry_after_seconds(response.headers, now=self._now())
        return refusal(
            status,
            endpoint=where,
            retry_after=wait,
            says=Refusals(
                unauthorized=f"the ai-models cluster at {where} refused the token as unauthenticated "
                f"(HTTP 401); {TOKEN_HINT}, e.g. a ServiceAccount token of that cluster",
                forbidden=f"the ai-models cluster at {where} denied the listing of its ClusterModels "
                "(HTTP 403): the token's subject there needs list on clustermodels.ai.deckhouse.io (the "
                "ai-models User access level without a namespace limit)",
                not_found=f"{where} has no ClusterModel listing at {LISTING_PATH} (HTTP 404): point "
                "spec.aiModels.endpoint at the public serving API of an ai-models cluster (its version "
                "must serve the listing)",
                rate_limited=f"the ai-models cluster at {where} asked to slow down (HTTP 429), retry in "
                f"{wait}s; the pass resumes from its checkpoint",
                unavailable=f"the ai-models cluster at {where} failed with HTTP {status}; the pass resumes "
                "from its checkpoint; if it persists, check that cluster's api",
                redirect=f"{where} answered the listing with a redirect (HTTP {status}) that was not "
                "followed: point spec.aiModels.endpoint at the URL the serving API is served at",
                rejected=f"the ai-models cluster at {where} rejected the listing request (HTTP {status}), "
                "e.g. a page token of an earlier pass: the next pass starts from the first page",
            ),
        )

    def _invalid(self, what: str) -> ProviderInvalidResponse:
        return ProviderInvalidResponse(
            f"{self.endpoint} sent {what}: check that spec.aiModels.endpoint is the public serving API of "
            "an ai-models cluster",
            endpoint=self.endpoint,
        )

    def _unreachable(self, error: httpx2.HTTPError) -> ProviderUnavailable:
        # The error's type only: its text may quote what the remote sent.
        cause = type(error).__name__
        if isinstance(error.__context__, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY" in str(error):
            return ProviderUnavailable(
                f"the ai-models cluster at {self.endpoint} presents a certificate this cluster does not "
                f"trust ({cause}): put the CA that signed it into spec.aiModels.caBundle",
                endpoint=self.endpoint,
            )
        return ProviderUnavailable(
            f"the ai-models cluster at {self.endpoint} is unreachable or broke off its answer ({cause}): "
            "the pass resumes from its checkpoint; check spec.aiModels.endpoint and the network path "
            "(DNS, egress, proxy) to that cluster",
            endpoint=self.endpoint,
        )


def _item(raw: object) -> RemoteClusterModel | None:
    if not isinstance(raw, dict):
        return None
    name, digest, size = raw.get("name"), raw.get("digest"), raw.get("sizeBytes")
    revision, resolved = raw.get("revision"), raw.get("resolved")
    if not (isinstance(name, str) and len(name) <= MAX_NAME and NAME.fullmatch(name)):
        return None
    if not (isinstance(digest, str) and DIGEST.fullmatch(digest)):
        return None
    if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0):
        return None
    return RemoteClusterModel(
        name=name,
        digest=digest,
        size_bytes=size,
        revision=revision if isinstance(revision, str) and revision else None,
        resolved=resolved if isinstance(resolved, dict) else {},
    )
