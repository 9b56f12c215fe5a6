"""The Model and ClusterModel reads of the node plugin: the shared `NodeModels`, Ready answers kept.

NodePublishVolume and the prefetcher ask "does this object exist, is it Ready, which digest does it
publish" (`authorize.authorize`). Every kubelet retry of every pod on the node asks again, so a Ready
answer is kept `ttl_seconds` (bounded to `capacity` objects): a model deleted meanwhile may still be
mounted for that long, which the cache tolerates because the tree it mounts was verified against the
digest the object published. Anything else (missing, not Ready) is never kept: the user fixes it and
the next kubelet retry must see the fix at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.model_reader import ModelReader, ReadModel, keep_ready, model_getter
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey

DEFAULT_TTL_SECONDS: Final = 10.0
DEFAULT_CAPACITY: Final = 512
# A kubelet call waits on this read; the API server answers a GET in milliseconds when healthy.
READ_TIMEOUT: Final = (3.0, 5.0)


class ModelsUnreadable(Exception):
    """The API server could not be asked; the message names the object and the cause, never the
    server's own text."""


class NodeModels:
    """`seen(key)`: the object as authorization needs it; thread-safe (gRPC calls run in a pool)."""

    def __init__(
        self,
        read: ReadModel,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = ModelReader(
            read, ttl_seconds=ttl_seconds, capacity=capacity, keep=keep_ready, clock=clock
        )

    @classmethod
    def of_cluster(cls, api_client: Any, **options: Any) -> NodeModels:
        return cls(model_getter(api_client, timeout=READ_TIMEOUT), **options)

    def seen(self, key: ModelKey) -> ModelSeen:
        try:
            return self._reader.read(key).seen
        except KubeError as error:
            raise ModelsUnreadable(_unreadable(key, error)) from error


def _unreadable(key: ModelKey, error: KubeError) -> str:
    if error.status == 0:
        return (
            f"cannot read {key.describe()}: the API server is unreachable ({error.message}); "
            "the mount is retried"
        )
    message = f"cannot read {key.describe()}: the API server answered {error.status}; the mount is retried"
    if error.forbidden:
        message += ", check the node-cache plugin's RBAC (get on models and clustermodels)"
    return message
