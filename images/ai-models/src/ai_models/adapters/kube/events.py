"""The controller's one Event recorder: what `kubectl describe` shows under Events.

An Event about a namespaced object lives in that namespace; one about a cluster-scoped object
(ClusterModel, ModelCatalogSource) lives in `default` with `involvedObject.namespace` empty, which
is where and how `kubectl describe` looks for it. The same reason and message on the same object
within the aggregation window updates one Event's count instead of creating another, so a
retrying object does not flood the namespace. Failing to record an Event never fails a reconcile.

`listed_events` reads one page of the Events the API server filters by a field selector (what a
provisioner reported about a claim).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import EVENTS
from ai_models.domain.conditions import timestamp
from ai_models.names import CLUSTER_EVENTS_NAMESPACE, EVENTS_COMPONENT

log = logging.getLogger(__name__)
MESSAGE_LIMIT = 1024
AGGREGATION_WINDOW = datetime.timedelta(minutes=10)
REMEMBERED_EVENTS = 4096  # recent Events whose count a repeat increments, least recent forgotten
# (connect, read) of each write: shorter than other calls', since a reconcile waits for its Events
# and an Event is worth less than the step that reports it.
EVENT_TIMEOUT: Final = (3.0, 10.0)


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
        timeout: tuple[float, float] = EVENT_TIMEOUT,
    ) -> None:
        self._events = Objects(api_client, EVENTS, timeout=timeout)
        self._component = component
        self._instance = instance
        self._clock = clock
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
            created = self._events.create(body) or {}
        except KubeError as error:
            log.warning(
                "cannot record an event",
                extra={"object": f"{obj.get('kind')} {meta['name']}", "reason": reason, "error": str(error)},
            )
            return
        self._remember(signature, (str((created.get("metadata") or {}).get("name") or ""), 1, now))

    def _bump(self, namespace: str, name: str, count: int, now: datetime.datetime) -> bool:
        try:
            self._events.patch(name, {"count": count, "lastTimestamp": timestamp(now)}, namespace)
        except KubeError as error:
            if error.status:
                return False  # gone (expired, deleted) or refused: a new Event is recorded instead
            log.warning("cannot update an event", extra={"event": name, "error": str(error)})
            return True  # not reachable now; a second Event would not reach it either
        return True

    def _remember(self, signature: tuple[str, ...], entry: tuple[str, int, datetime.datetime]) -> None:
        with self._lock:
            self._recent[signature] = entry
            self._recent.move_to_end(signature)
            while len(self._recent) > REMEMBERED_EVENTS:
                self._recent.popitem(last=False)


def listed_events(
    api_client: Any, namespace: str, *, field_selector: str, limit: int
) -> list[dict[str, Any]]:
    """One page of the Events of `namespace` that `field_selector` picks (the API server filters);
    raises `KubeError`."""
    page = Objects(api_client, EVENTS).list_page(namespace, field_selector=field_selector, limit=limit)
    return [item for item in page.get("items") or () if isinstance(item, dict)]
