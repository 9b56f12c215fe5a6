"""The Model and ClusterModel reads of the node plugin: one GET each, granted answers kept briefly.

NodePublishVolume and the prefetcher ask "does this object exist, is it Ready, which digest does it
publish" (`authorize.authorize`). Every kubelet retry of every pod on the node asks again, so a Ready
answer is kept `ttl_seconds` (bounded to `capacity` objects, least recently used out first): a
model deleted meanwhile may still be mounted for that long, which the cache tolerates because the
tree it mounts was verified against the digest the object published. Anything else (missing, not
Ready) is never kept: the user fixes it and the next kubelet retry must see the fix at once.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ai_models.adapters.kube.models import ModelObjects
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelPhase

DEFAULT_TTL_SECONDS: Final = 10.0
DEFAULT_CAPACITY: Final = 512
# A kubelet call waits on this read; the API server answers a GET in milliseconds when healthy.
READ_TIMEOUT: Final = (3.0, 5.0)

ReadObject = Callable[[ModelKey], Mapping[str, Any] | None]


class ModelsUnreadable(Exception):
    """The API server could not be asked; the message names the object and the cause, never the
    server's own text."""


@dataclasses.dataclass(frozen=True)
class _Kept:
    seen: ModelSeen
    until: float


class ModelReader:
    """`seen(key)`: the object as authorization needs it; thread-safe (gRPC calls run in a pool)."""

    def __init__(
        self,
        read: ReadObject,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._clock = clock
        self._kept: collections.OrderedDict[ModelKey, _Kept] = collections.OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def of_cluster(cls, api_client: Any, **options: Any) -> ModelReader:
        objects = ModelObjects(api_client, timeout=READ_TIMEOUT)
        return cls(lambda key: _read_or_unreadable(objects, key), **options)

    def seen(self, key: ModelKey) -> ModelSeen:
        now = self._clock()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.until > now:
                self._kept.move_to_end(key)
                return kept.seen
        # Read outside the lock: one slow GET must not hold every other pod's publish.
        seen = ModelSeen.of(key, self._read(key))
        with self._lock:
            if seen.phase is ModelPhase.READY and seen.digest:
                self._kept[key] = _Kept(seen, now + self._ttl)
                self._kept.move_to_end(key)
                while len(self._kept) > self._capacity:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(key, None)
        return seen


def _read_or_unreadable(objects: ModelObjects, key: ModelKey) -> Mapping[str, Any] | None:
    try:
        return objects.get(key)
    except ApiException as error:
        raise ModelsUnreadable(
            f"cannot read {key.describe()}: the API server answered {error.status}; the mount is "
            "retried, check the node-cache plugin's RBAC (get on models and clustermodels)"
            if error.status in (401, 403)
            else f"cannot read {key.describe()}: the API server answered {error.status}; the mount is retried"
        ) from error
    except (HTTPError, OSError) as error:
        raise ModelsUnreadable(
            f"cannot read {key.describe()}: the API server is unreachable ({type(error).__name__}); "
            "the mount is retried"
        ) from error
