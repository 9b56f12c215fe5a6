"""The one caching reader of Models and ClusterModels: one GET per object, answers kept briefly.

The api's serving and lookup and the node plugin's mounts ask about the same few objects on every
request (a materializer fetching hundreds of files, every kubelet retry of every pod on a node), so
an answer is kept `ttl_seconds`, bounded to `capacity` objects (least recently used out first).
What is kept is the caller's rule (`keep`): the api keeps every answer, absences included, for a
TTL short enough that a phase change is seen soon; the node plugin keeps only Ready answers, since
anything else is what its user is about to fix. Every answer is read by the one rule every reader
of a Model follows (`ModelSeen.of`). A failed read raises `KubeError` and is never kept.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS
from ai_models.adapters.ttl_cache import TtlCache
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind, ModelPhase

DEFAULT_CAPACITY: Final = 10_000

ReadModel = Callable[[ModelKey], Mapping[str, Any] | None]


@dataclasses.dataclass(frozen=True)
class ModelRead:
    """One answer: the object as the API server has it, or None when there is none."""

    key: ModelKey
    body: Mapping[str, Any] | None

    @functools.cached_property
    def seen(self) -> ModelSeen:
        return ModelSeen.of(self.key, self.body)


KeepRule = Callable[[ModelRead], bool]


def keep_every_answer(_: ModelRead) -> bool:
    return True


def keep_ready(read: ModelRead) -> bool:
    """Only an object that is Ready with an artifact: what a mount is granted on."""
    return read.seen.phase is ModelPhase.READY and bool(read.seen.digest)


def model_getter(api_client: Any, *, timeout: tuple[float, float]) -> ReadModel:
    """A GET of the Model or ClusterModel `key` names; None when it does not exist."""
    models = Objects(api_client, MODELS, timeout=timeout)
    cluster_models = Objects(api_client, CLUSTER_MODELS, timeout=timeout)

    def read(key: ModelKey) -> Mapping[str, Any] | None:
        if key.kind is ModelKind.MODEL:
            return models.get(key.name, key.namespace)
        return cluster_models.get(key.name)

    return read


class ModelReader:
    """Thread-safe: the node plugin's gRPC calls and the api's requests run in pools."""

    def __init__(
        self,
        read: ReadModel,
        *,
        ttl_seconds: float,
        capacity: int = DEFAULT_CAPACITY,
        keep: KeepRule = keep_every_answer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._keep = keep
        self._kept: TtlCache[ModelKey, ModelRead] = TtlCache(
            ttl_seconds=ttl_seconds, max_entries=capacity, clock=clock
        )

    def read(self, key: ModelKey, *, fresh: bool = False) -> ModelRead:
        """The object `key` names, kept or read now (`fresh`: always read now, and keep the answer)."""
        if not fresh:
            kept = self._kept.get(key)
            if kept is not None:
                return kept
        # Read outside any lock: one slow GET must not hold every other caller.
        answer = ModelRead(key, self._read(key))
        if self._keep(answer):
            self._kept.put(key, answer)
        else:
            self._kept.discard(key)
        return answer
