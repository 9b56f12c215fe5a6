"""Models and ClusterModels as the api reads them, with the api's own ServiceAccount.

Serving and lookup read the object on every request, so answers are kept for a short TTL
(`api_object_cache_seconds`): a materializer fetching hundreds of files costs one read, and a
phase change is seen within the TTL. Uploads read fresh, because they decide on the phase.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client

from ai_models.api.kube_calls import KubeCalls
from ai_models.api.ttl_cache import TtlCache
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner
from ai_models.names import API_GROUP, API_VERSION, ModelKind, ModelPhase

MAX_CACHED: Final = 10_000


@dataclasses.dataclass(frozen=True)
class ModelObject:
    """An existing object: its phase and artifact read by the one rule every reader of a Model
    follows (`ModelSeen.of`: no phase yet or one this version does not know is Pending), the rest
    of its status kept for what only the api reads (upload URLs, the resolved profile)."""

    ref: ModelKey
    uid: str
    status: Mapping[str, Any]

    @functools.cached_property
    def seen(self) -> ModelSeen:
        return ModelSeen.of(self.ref, {"status": self.status})

    @property
    def phase(self) -> ModelPhase:
        return self.seen.phase or ModelPhase.PENDING  # never None: the object exists

    @property
    def digest(self) -> str | None:
        return self.seen.digest or None

    @property
    def owner(self) -> Owner:
        return Owner(kind=self.ref.kind.value, namespace=self.ref.namespace, name=self.ref.name, uid=self.uid)


def _from_body(ref: ModelKey, body: Mapping[str, Any]) -> ModelObject:
    status = body.get("status")
    return ModelObject(
        ref=ref,
        uid=str((body.get("metadata") or {}).get("uid") or ""),
        status=status if isinstance(status, Mapping) else {},
    )


class ModelReader:
    def __init__(
        self,
        *,
        api_client: Any,
        calls: KubeCalls,
        request_timeout: tuple[float, float],
        cache_ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._objects = client.CustomObjectsApi(api_client)
        self._calls = calls
        self._timeout = request_timeout
        self._cache: TtlCache[ModelKey, ModelObject] = TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )
        # TtlCache answers None for a miss, so a remembered absence needs a marker of its own.
        self._absent: TtlCache[ModelKey, bool] = TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )

    def get(self, ref: ModelKey, *, fresh: bool = False) -> ModelObject | None:
        """The object, or None when it does not exist; raises ApiProblem (502/503) on API failures."""
        if not fresh:
            found = self._cache.get(ref)
            if found is not None:
                return found
            if self._absent.get(ref):
                return None
        body = self._read(ref)
        if body is None:
            self._absent.put(ref, True)
            return None
        obj = _from_body(ref, body)
        self._cache.put(ref, obj)
        return obj

    def _read(self, ref: ModelKey) -> Mapping[str, Any] | None:
        plural = ref.kind.plural.value
        needs = f"get on {plural}.{API_GROUP}"
        if ref.kind is ModelKind.MODEL:
            body: Mapping[str, Any] | None = self._calls.call(
                "GetModel",
                lambda: self._objects.get_namespaced_custom_object(
                    API_GROUP, API_VERSION, ref.namespace, plural, ref.name, _request_timeout=self._timeout
                ),
                needs=needs,
                on_missing=lambda: None,
            )
            return body
        cluster_body: Mapping[str, Any] | None = self._calls.call(
            "GetClusterModel",
            lambda: self._objects.get_cluster_custom_object(
                API_GROUP, API_VERSION, plural, ref.name, _request_timeout=self._timeout
            ),
            needs=needs,
            on_missing=lambda: None,
        )
        return cluster_body
