"""The controller's one Event recorder: what `kubectl describe` shows under Events.

An Event about a namespaced object lives in that namespace; one about a cluster-scoped object
(ClusterModel, ModelCatalogSource) lives in `default` with `involvedObject.namespace` empty, which
is where and how `kubectl describe` looks for it. The same reason and message on the same object
within the aggregation window updates one Event's count instead of creating another, so a
retrying object does not flood the namespace. Failing to record an Event never fails a reconcile.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.domain.conditions import timestamp
from ai_models.names import CLUSTER_EVENTS_NAMESPACE, EVENTS_COMPONENT

log = logging.getLogger(__name__)
MESSAGE_LIMIT = 1024
AGGREGATION_WINDOW = datetime.timedelta(minutes=10)
REMEMBERED_EVENTS = 4096  # recent Events whose count a repeat increments, least recent forgotten


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class EventRecorder:
    def __init__(
        self,
        api_client: Any,
        *,
        component: str = EVENTS_COMPONENT,
        instance: str = EVENTS_COMPONENT,
        clock: Callable[[], datetime.datetime] = _utcnow,
        timeout: tuple[float, float] = (3, 10),
    ) -> None:
        self._core = k8s.CoreV1Api(api_client)
        self._component = component
        self._instance = instance
        self._clock = clock
        self._timeout = timeout
        self._lock = threading.Lock()
        # (namespace, uid, type, reason, message) -> (event name, count, first seen)
        self._recent: OrderedDict[tuple[str, ...], tuple[str, int, datetime.datetime]] = OrderedDict()

    def record(self, obj: Mapping[str, Any], *, type_: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        object_namespace = str(meta.get("namespace") or "")
        namespace = object_namespace or CLUSTER_EVENTS_NAMESPACE
        message = message[:MESSAGE_LIMIT]
        now = self._clock()
        signature = (namespace, str(meta.get("uid", "")), type_, reason, message)
        with self._lock:
            seen = self._recent.get(signature)
        if seen is not None and now - seen[2] < AGGREGATION_WINDOW:
            name, count, first = seen
            if self._bump(namespace, name, count + 1, now):
                self._remember(signature, (name, count + 1, first))
                return
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            # The API server keeps 58 characters of a generateName (the name may have 253).
            "metadata": {"generateName": f"{str(meta['name'])[:57]}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": meta["name"],
                "namespace": object_namespace,
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": timestamp(now),
            "lastTimestamp": timestamp(now),
            "count": 1,
        }
        try:
            created = self._core.create_namespaced_event(namespace, body, _request_timeout=self._timeout)
        except Exception as error:
            log.warning(
                "cannot record an event",
                extra={"object": f"{obj.get('kind')} {meta['name']}", "reason": reason, "error": str(error)},
            )
            return
        self._remember(signature, (str(created.metadata.name), 1, now))

    def _bump(self, namespace: str, name: str, count: int, now: datetime.datetime) -> bool:
        try:
            self._core.patch_namespaced_event(
                name,
                namespace,
                {"count": count, "lastTimestamp": timestamp(now)},
                _request_timeout=self._timeout,
            )
        except ApiException:
            return False  # gone (expired, deleted): a new Event is recorded instead
        except Exception as error:
            log.warning("cannot update an event", extra={"event": name, "error": str(error)})
            return True  # not reachable now; a second Event would not reach it either
        return True

    def _remember(self, signature: tuple[str, ...], entry: tuple[str, int, datetime.datetime]) -> None:
        with self._lock:
            self._recent[signature] = entry
            self._recent.move_to_end(signature)
            while len(self._recent) > REMEMBERED_EVENTS:
                self._recent.popitem(last=False)
