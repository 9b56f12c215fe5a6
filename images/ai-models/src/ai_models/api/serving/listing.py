"""The serving API's paged listing of Ready ClusterModels, what another cluster's `AIModels`
catalog source indexes: each one's name, artifact digest and size, source revision and resolved
profile (`status.resolved`, the facts a catalog entry shows).

Pages are keyed by name (keyset paging): the token says "after this name", so it never expires
and a ClusterModel created or deleted between two pages moves no other one to another page.
Kubernetes' own `continue` tokens expire within minutes (etcd compaction), which a pass resumed
after a controller restart would hit. Every page reads the ClusterModels from the API server in
chunks of `LIST_CHUNK` (a cluster holds few: each is a published model of gigabytes), keeps the
Ready ones after the token's name in name order, and stops as soon as it has one more than the
page needs. Objects whose status cannot be read as the contract says are left out and logged:
one damaged status must not hide the others from the remote cluster.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import ValidationError

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import CLUSTER_MODELS
from ai_models.api.kube_calls import KubeCalls
from ai_models.api.models_serving import (
    ClusterModelListQuery,
    ClusterModelPage,
    ServedClusterModel,
)
from ai_models.api.problems import invalid_page_token
from ai_models.names import ModelPhase

log = logging.getLogger(__name__)

LIST_CHUNK: Final = 500
TOKEN_VERSION: Final = 1


def encode_token(after: str) -> str:
    document = json.dumps([TOKEN_VERSION, after], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(document).rstrip(b"=").decode()


def decode_token(token: str) -> str:
    """The name a page token continues after; 400 `invalid-page-token` for anything not issued here."""
    try:
        padded = token + "=" * (-len(token) % 4)
        document = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        document = None
    if (
        not isinstance(document, list)
        or len(document) != 2  # version, name
        or document[0] != TOKEN_VERSION
        or not isinstance(document[1], str)
    ):
        raise invalid_page_token(
            "pageToken is not a token this listing issued: pass the nextPageToken of the previous "
            "page unchanged, or leave pageToken out to start from the first page"
        )
    return document[1]


def served(body: Mapping[str, Any]) -> ServedClusterModel | None:
    """The listing item of a ClusterModel object, or None unless it is Ready with an artifact."""
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    if not isinstance(status, Mapping) or status.get("phase") != ModelPhase.READY.value:
        return None
    artifact = status.get("artifact") or {}
    source = status.get("source") or {}
    resolved = status.get("resolved")
    if not isinstance(artifact, Mapping) or not artifact.get("digest"):
        return None
    try:
        return ServedClusterModel.model_validate(
            {
                "name": metadata.get("name"),
                "digest": artifact.get("digest"),
                "sizeBytes": artifact.get("sizeBytes"),
                "revision": source.get("resolvedRevision") if isinstance(source, Mapping) else None,
                "resolved": resolved if isinstance(resolved, Mapping) and resolved else None,
            }
        )
    except ValidationError as error:
        log.warning(
            "a Ready ClusterModel is left out of the serving listing: its status does not read as the "
            "contract says",
            extra={"clustermodel": metadata.get("name"), "error": str(error.errors()[:3])},
        )
        return None


class ClusterModelListing:
    def __init__(self, *, api_client: Any, calls: KubeCalls, request_timeout: tuple[float, float]) -> None:
        self._cluster_models = Objects(api_client, CLUSTER_MODELS, timeout=request_timeout)
        self._calls = calls

    def page(self, query: ClusterModelListQuery) -> ClusterModelPage:
        """One page of Ready ClusterModels in name order; raises ApiProblem (400, 502, 503)."""
        after = decode_token(query.page_token) if query.page_token is not None else None
        found: list[ServedClusterModel] = []
        # The API server lists cluster-scoped objects in key order, which is name order, so the
        # first page_size + 1 Ready ones after the token are the page and the sign of a next one.
        for body in self._objects_after(after):
            item = served(body)
            if item is not None:
                found.append(item)
                if len(found) > query.page_size:
                    break
        found.sort(key=lambda item: item.name)
        items = found[: query.page_size]
        more = len(found) > query.page_size
        return ClusterModelPage(items=items, nextPageToken=encode_token(items[-1].name) if more else None)

    def _objects_after(self, after: str | None) -> Iterator[Mapping[str, Any]]:
        token: str | None = None
        while True:
            answer: Mapping[str, Any] = self._calls.call(
                "ListClusterModels",
                functools.partial(self._cluster_models.list_page, limit=LIST_CHUNK, continue_token=token),
                needs=f"list on {CLUSTER_MODELS}",
            )
            for body in answer.get("items") or ():
                name = str((body.get("metadata") or {}).get("name") or "")
                if after is None or name > after:
                    yield body
            token = (answer.get("metadata") or {}).get("continue") or None
            if token is None:
                return
