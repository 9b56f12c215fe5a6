"""List-and-watch of one collection, kept in memory with indexes: the controller's informer.

One `Informer` follows one `Resource` in one namespace or in all of them (`namespace=None`), with
optional label and field selectors. It lists (in pages) and then watches from the list's
resourceVersion; a watch that ends is resumed from the last resourceVersion it saw, a 410 (too old)
relists and reports the difference as changes. Every change goes to the handlers as `(old, new)`
(`old` None: added; `new` None: deleted); a resync hands every cached object to them again as
`(obj, obj)`, so level-triggered controllers look at everything now and then.

The cache is the controller's memory, so it keeps less than the API serves: every object loses
`metadata.managedFields` and kubectl's last-applied-configuration annotation (`slim`, or the
`transform` a kind needs), which no consumer reads and which are often larger than the rest.
Objects handed out are shared with the cache: callers must not change them (`get` returns a copy).
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.resources import Lister, Resource, collection_lister

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for a cluster-scoped object
Handler = Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], None]
Indexer = Callable[[Mapping[str, Any]], Iterable[str]]
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
LIST_PAGE_SIZE = 500
RETRY_SECONDS = 2.0


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


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = obj["metadata"]
    return str(metadata.get("namespace") or ""), str(metadata["name"])


class Informer:
    def __init__(
        self,
        api_client: Any,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
        resync_seconds: float | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] = slim,
        watch_timeout_seconds: int = 300,
        name: str | None = None,
        lister: Lister | None = None,
    ) -> None:
        self.resource = resource
        self.name = name or (f"{resource}@{namespace}" if namespace else str(resource))
        self._list = lister or collection_lister(api_client, resource, namespace)
        self._selectors = {
            key: value
            for key, value in (("label_selector", label_selector), ("field_selector", field_selector))
            if value
        }
        self._indexers = dict(indexers or {})
        self._resync = resync_seconds
        self._transform = transform
        self._timeout = watch_timeout_seconds
        self._handlers: list[Handler] = []
        self._objects: dict[ObjectKey, dict[str, Any]] = {}
        self._indices: dict[str, dict[str, set[ObjectKey]]] = {index: {} for index in self._indexers}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._threads: list[threading.Thread] = []

    # ----- wiring and lifecycle -----------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call `handler(old, new)` on every change from now on; add handlers before `start`."""
        self._handlers.append(handler)

    def start(self) -> Informer:
        self._stop.clear()
        self._threads = [self._spawn(self._run, f"informer-{self.name}")]
        if self._resync:
            self._threads.append(self._spawn(self._resync_loop, f"resync-{self.name}"))
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()

    def wait_synced(self, timeout: float) -> bool:
        return self._synced.wait(timeout)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    # ----- reads --------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the cached object, which the caller may change."""
        with self._lock:
            found = self._objects.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def objects(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def keys(self) -> list[ObjectKey]:
        with self._lock:
            return list(self._objects)

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        with self._lock:
            keys = self._indices[index].get(value, ())
            return [self._objects[key] for key in keys]

    # ----- the cache ----------------------------------------------------------------------------

    def _index_values(self, obj: Mapping[str, Any] | None) -> dict[str, set[str]]:
        if obj is None:
            return {index: set() for index in self._indexers}
        values: dict[str, set[str]] = {}
        for index, indexer in self._indexers.items():
            try:
                values[index] = set(indexer(obj))
            except Exception:
                log.exception("an indexer failed", extra={"informer": self.name, "index": index})
                values[index] = set()
        return values

    def _store(self, key: ObjectKey, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        """Put `obj` (None: remove) under `key`, updating the indexes; the previous object. Holds the lock."""
        old = self._objects.pop(key, None) if obj is None else self._objects.get(key)
        if obj is not None:
            self._objects[key] = obj
        if self._indexers:
            before, after = self._index_values(old), self._index_values(obj)
            for index in self._indexers:
                buckets = self._indices[index]
                for value in before[index] - after[index]:
                    bucket = buckets.get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del buckets[value]
                for value in after[index] - before[index]:
                    buckets.setdefault(value, set()).add(key)
        return old

    def _prepare(self, obj: dict[str, Any]) -> dict[str, Any]:
        # Items of a list carry no kind or apiVersion; every cached object does.
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return self._transform(obj)

    def _notify(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for handler in self._handlers:
            try:
                handler(old, new)
            except Exception:
                obj = new or old or {}
                log.exception(
                    "an informer's change handler failed",
                    extra={"informer": self.name, "object": "/".join(key_of(obj)) if obj else ""},
                )

    def _list_all(self) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": LIST_PAGE_SIZE, **self._selectors}
            if token:
                kwargs["_continue"] = token
            response = self._list(_request_timeout=(3, 60), _preload_content=False, **kwargs)
            try:
                page = json.loads(response.data)
            finally:
                response.release_conn()
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return items, str(metadata.get("resourceVersion") or "")

    def _relist(self) -> str:
        items, version = self._list_all()
        fresh = {key_of(item): self._prepare(item) for item in items}
        changes: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = []
        with self._lock:
            for key in list(self._objects.keys() - fresh.keys()):
                changes.append((self._store(key, None), None))
            for key, obj in fresh.items():
                old = self._store(key, obj)
                if old != obj:
                    changes.append((old, obj))
        for old, new in changes:
            self._notify(old, new)
        self._synced.set()
        return version

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        obj = self._prepare(dict(event["raw_object"]))
        key = key_of(obj)
        with self._lock:
            old = self._store(key, None if kind == "DELETED" else obj)
        self._notify(old, None if kind == "DELETED" else obj)

    # ----- threads ------------------------------------------------------------------------------

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    def _run(self) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                # Objects arrive as the server's JSON (return type "object"), not as client models.
                self._watch = watch.Watch(return_type="object")
                if self._stop.is_set():  # stopped while listing: `stop` found no watch to end
                    return
                for event in self._watch.stream(
                    self._list,
                    resource_version=version,
                    timeout_seconds=self._timeout,
                    allow_watch_bookmarks=True,
                    _request_timeout=(3, self._timeout + 30),
                    **self._selectors,
                ):
                    if self._stop.is_set():
                        return
                    raw = event.get("raw_object") or {}
                    version = (raw.get("metadata") or {}).get("resourceVersion") or version
                    if event["type"] != "BOOKMARK":
                        self._apply(event)
            except ApiException as error:
                if error.status == 410:
                    version = None  # our resourceVersion is too old: list again
                    continue
                log.warning("watch failed; retrying", extra={"informer": self.name, "status": error.status})
                version = None
                self._stop.wait(RETRY_SECONDS)
            except Exception as error:
                if self._stop.is_set():
                    return
                log.warning(
                    "watch interrupted; retrying", extra={"informer": self.name, "error": repr(error)}
                )
                version = None
                self._stop.wait(RETRY_SECONDS)

    def _resync_loop(self) -> None:
        assert self._resync is not None
        next_at = time.monotonic() + self._resync
        while not self._stop.wait(max(next_at - time.monotonic(), 0)):
            next_at = time.monotonic() + self._resync
            if not self._synced.is_set():
                continue
            for obj in self.objects():
                if self._stop.is_set():
                    return
                self._notify(obj, obj)
