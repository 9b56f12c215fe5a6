"""List-and-watch of one kind of object in one namespace, kept in memory (a minimal informer).

Used for what the controller must follow without kopf's cluster-wide watches: its publication
Jobs and the ledger Secret in the module namespace, so RBAC stays a namespaced Role. A watch that
ends is resumed from the last resourceVersion; a 410 (too old) relists.

The store is the controller's in-memory state, so it keeps less than the API serves: every object
loses `metadata.managedFields` and kubectl's last-applied-configuration annotation (see `slim`),
which no consumer reads and which are often larger than the rest of the object.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

Lister = Callable[..., Any]  # a `list_namespaced_*` method of a typed API
ChangeHandler = Callable[[str, Mapping[str, Any] | None, Mapping[str, Any] | None], None]
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (changed in place) without what only writers need: the field managers' bookkeeping
    (`managedFields`, one entry per writer with a map of every field it set) and kubectl's copy
    of the whole object as last applied. An annotation map left empty is dropped, as the API
    server omits it."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return obj
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED_ANNOTATION in annotations:
        del annotations[LAST_APPLIED_ANNOTATION]
        if not annotations:
            del metadata["annotations"]
    return obj


class Informer:
    def __init__(
        self,
        *,
        api_client: Any,
        lister: Lister,
        namespace: str,
        what: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_change: ChangeHandler | None = None,
        watch_timeout_seconds: int = 300,
    ) -> None:
        self._client = api_client
        self._list = lister
        self._namespace = namespace
        self._what = what
        self._selectors = {
            key: value
            for key, value in (("label_selector", label_selector), ("field_selector", field_selector))
            if value
        }
        self._on_change = on_change
        self._timeout = watch_timeout_seconds
        self._objects: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self._what}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    def objects(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get(name)

    def _notify(self, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change(name, old, new)
        except Exception:
            log.exception("informer change handler failed", extra={"what": self._what, "object": name})

    def _relist(self) -> str:
        listed = self._list(self._namespace, _request_timeout=(3, 30), **self._selectors)
        fresh = {
            item["metadata"]["name"]: slim(item)
            for item in self._client.sanitize_for_serialization(listed.items)
        }
        with self._lock:
            previous, self._objects = self._objects, fresh
        for name in previous.keys() - fresh.keys():
            self._notify(name, previous[name], None)
        for name, obj in fresh.items():
            if previous.get(name) != obj:
                self._notify(name, previous.get(name), obj)
        self._synced.set()
        return str(listed.metadata.resource_version)

    def _run(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                self._watch = watch.Watch()
                if self._stop.is_set():  # stopped while listing: `stop` found no watch to end
                    return
                for event in self._watch.stream(
                    self._list,
                    self._namespace,
                    resource_version=version,
                    timeout_seconds=self._timeout,
                    allow_watch_bookmarks=True,
                    _request_timeout=(3, self._timeout + 30),
                    **self._selectors,
                ):
                    if self._stop.is_set():
                        return
                    kind = event["type"]
                    obj = self._client.sanitize_for_serialization(event["object"])
                    version = obj.get("metadata", {}).get("resourceVersion") or version
                    if kind == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    slim(obj)
                    with self._lock:
                        old = self._objects.get(name)
                        if kind == "DELETED":
                            self._objects.pop(name, None)
                        else:
                            self._objects[name] = obj
                    self._notify(name, old, None if kind == "DELETED" else obj)
            except ApiException as error:
                if error.status == 410:
                    version = None  # our resourceVersion is too old: list again
                    continue
                log.warning("watch failed; retrying", extra={"what": self._what, "status": error.status})
                version = None
                self._stop.wait(2)
            except Exception as error:
                if self._stop.is_set():
                    return
                log.warning("watch interrupted; retrying", extra={"what": self._what, "error": repr(error)})
                version = None
                self._stop.wait(2)
