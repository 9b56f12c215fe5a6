"""Models and ClusterModels as the api reads them, with the api's own ServiceAccount.

Serving and lookup read the object on every request, so answers are kept for a short TTL
(`api_object_cache_seconds`) by the reader the node plugin shares (`adapters/kube/model_reader.py`):
a materializer fetching hundreds of files costs one read, and a phase change is seen within the TTL.
Uploads read fresh, because they decide on the phase.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.model_reader import ModelReader, keep_every_answer, model_getter
from ai_models.api.kube_calls import KubeCalls
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner
from ai_models.names import API_GROUP, ModelKind, ModelPhase

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


class ApiModels:
    """The api's reads of Models and ClusterModels: the shared `ModelReader`, every answer kept."""

    def __init__(
        self,
        *,
        api_client: Any,
        calls: KubeCalls,
        request_timeout: tuple[float, float],
        cache_ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._calls = calls
        self._reader = ModelReader(
            model_getter(api_client, timeout=request_timeout),
            ttl_seconds=cache_ttl_seconds,
            capacity=MAX_CACHED,
            keep=keep_every_answer,
            clock=clock,
        )

    def get(self, ref: ModelKey, *, fresh: bool = False) -> ModelObject | None:
        """The object, or None when it does not exist; raises ApiProblem (502/503) on API failures."""
        call = "GetModel" if ref.kind is ModelKind.MODEL else "GetClusterModel"
        read = self._calls.call(
            call,
            lambda: self._reader.read(ref, fresh=fresh),
            needs=f"get on {ref.kind.plural.value}.{API_GROUP}",
        )
        return _from_body(ref, read.body) if read.body is not None else None
