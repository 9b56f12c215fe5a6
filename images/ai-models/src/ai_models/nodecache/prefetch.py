"""Prefetch: the downloads start when a pod is bound to this node, before kubelet asks to mount.

The Pods with `spec.nodeName=<this node>` are watched (the project's informer, trimmed to what is
read here). For every inline volume of this driver in a pod that is not finished or going away, the
model it names is authorized exactly as NodePublish authorizes it (`authorize.wanted_model` with the
Pod object's own namespace, which the API server guarantees; the attributes are hints), read through
the plugin's `NodeModels`, and its digest is wanted from the cache. A refusal is logged and left to
NodePublish to report; the informer's resync offers every pod again, so a model that becomes Ready
later is fetched then. Work runs in one thread fed by a bounded queue: a slow Model read never
holds the watch.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any, Final, Protocol

from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import PODS
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import NODE_CACHE_DRIVER
from ai_models.nodecache.authorize import PodIdentity, Refused, authorize, wanted_model
from ai_models.nodecache.cache import CacheRequest, CacheState
from ai_models.nodecache.models import ModelsUnreadable

logger = logging.getLogger(__name__)

RESYNC_SECONDS: Final = 60.0
QUEUE_SIZE: Final = 1024
# A pod holds at most this many volumes of the driver worth looking at (the rest is not ours).
MAX_VOLUMES: Final = 64
_FINISHED: Final = frozenset({"Succeeded", "Failed"})


class WantedCache(Protocol):
    def want(self, request: CacheRequest) -> CacheState: ...


class SeenModels(Protocol):
    def seen(self, key: ModelKey) -> ModelSeen: ...


def trimmed(pod: dict[str, Any]) -> dict[str, Any]:
    """What prefetch reads of a Pod (the informer keeps only this)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    listed = spec.get("volumes")
    volumes: list[Any] = listed if isinstance(listed, list) else []
    return {
        "metadata": {
            key: metadata[key] for key in ("name", "namespace", "uid", "deletionTimestamp") if key in metadata
        },
        "spec": {
            "volumes": [
                {"csi": volume["csi"]}
                for volume in volumes[:MAX_VOLUMES]
                if isinstance(volume, Mapping)
                and isinstance(volume.get("csi"), Mapping)
                and volume["csi"].get("driver") == NODE_CACHE_DRIVER
            ]
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def cache_requests(pod: Mapping[str, Any], *, models: SeenModels) -> list[CacheRequest]:
    """The artifacts a pod on this node will mount, each authorized as NodePublish would."""
    metadata = pod.get("metadata") or {}
    if metadata.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in _FINISHED:
        return []
    identity = PodIdentity(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
    )
    requests = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        attributes = volume["csi"].get("volumeAttributes")
        if not isinstance(attributes, Mapping):
            continue
        try:
            wanted = wanted_model(
                {str(key): str(value) for key, value in attributes.items()},
                namespace=identity.namespace,
                pod=identity.describe(),
            )
            grant = authorize(pod=identity, wanted=wanted, seen=models.seen(wanted.key))
        except Refused as refusal:
            logger.info("not prefetched", extra={"pod": identity.describe(), "reason": refusal.message})
            continue
        except ModelsUnreadable as error:
            logger.warning("not prefetched", extra={"pod": identity.describe(), "reason": str(error)})
            continue
        requests.append(CacheRequest(ref=grant.key, digest=grant.digest))
    return requests


class Prefetcher:
    def __init__(
        self,
        *,
        cache: WantedCache,
        models: SeenModels,
        api_client: Any,
        node_name: str,
        resync_seconds: float = RESYNC_SECONDS,
    ) -> None:
        self._cache = cache
        self._models = models
        self._informer = Informer(
            api_client,
            PODS,
            field_selector=f"spec.nodeName={node_name}",
            resync_seconds=resync_seconds,
            transform=trimmed,
            name=f"pods-on-{node_name}",
        )
        self._informer.add_handler(self._changed)
        self._queue: queue.Queue[Mapping[str, Any]] = queue.Queue(maxsize=QUEUE_SIZE)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name="node-cache-prefetch", daemon=True)

    def start(self) -> Prefetcher:
        self._worker.start()
        self._informer.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._informer.stop()
        self._worker.join(timeout=10)

    @property
    def synced(self) -> bool:
        return self._informer.synced

    def _changed(self, _old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if new is None or not (new.get("spec") or {}).get("volumes"):
            return
        try:
            self._queue.put_nowait(new)
        except queue.Full:
            # The resync offers the pod again; the watch must not wait on the worker.
            logger.warning("prefetch queue full; a pod waits for the next resync")

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                pod = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                for request in cache_requests(pod, models=self._models):
                    self._cache.want(request)
            except Exception:
                logger.exception("prefetch failed for a pod")
