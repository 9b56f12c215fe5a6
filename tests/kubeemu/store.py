"""Object storage with one global resourceVersion counter, a bounded event log and watch subscribers.

Stored objects are never mutated in place: every write stores a new dict, so a list snapshot or a
logged watch event can keep references to them safely. Callers copy before changing anything.
Every public method takes the lock, so a write, its log entry and its fan-out to subscribers are
one atomic step, and a new watch takes its snapshot (or replay) and subscribes atomically too:
no event can fall between a list and a watch started from its resourceVersion.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kubeemu import errors

ObjectKey = tuple[str, str, str]  # (storage key, namespace or "", name)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    rv: int
    obj: dict[str, Any]
    old: dict[str, Any] | None = None


class Subscriber(Protocol):
    def offer(self, event: WatchEvent) -> None:
        """Called under the store lock for every event of the subscribed storage; must not block."""


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _owner_uids(obj: dict[str, Any]) -> set[str]:
    refs = _meta(obj).get("ownerReferences") or []
    return {ref["uid"] for ref in refs if isinstance(ref, dict) and isinstance(ref.get("uid"), str)}


class Store:
    def __init__(self, *, event_log_size: int = 2000) -> None:
        self.lock = threading.RLock()
        self._event_log_size = event_log_size
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._log: dict[str, deque[WatchEvent]] = {}
        self._evicted_up_to: dict[str, int] = {}
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._dependents: dict[str, set[ObjectKey]] = {}
        self._uids: dict[str, ObjectKey] = {}
        # The uids of deleted objects: a dependent created for one of them is garbage.
        self._deleted_uids: set[str] = set()
        self._rv = 0
        # Events before this resourceVersion are not in the log (a restored store has none).
        self._history_starts = 0

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self._objects.get(key, {}).get((namespace, name))

    def list_objects(self, key: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects sorted like etcd keys (namespace, name) and the resourceVersion of this snapshot."""
        with self.lock:
            bucket = self._objects.get(key, {})
            keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
            return [bucket[k] for k in keys], self._rv

    def count(self, key: str) -> int:
        with self.lock:
            return len(self._objects.get(key, {}))

    def keys(self) -> list[str]:
        with self.lock:
            return [k for k, bucket in self._objects.items() if bucket]

    def put(self, key: str, obj: dict[str, Any]) -> WatchEvent:
        """Store `obj` (ADDED or MODIFIED), stamping a fresh resourceVersion into its metadata."""
        with self.lock:
            meta = _meta(obj)
            ident = (meta.get("namespace") or "", meta["name"])
            bucket = self._objects.setdefault(key, {})
            old = bucket.get(ident)
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            bucket[ident] = obj
            if isinstance(meta.get("uid"), str):
                self._uids[meta["uid"]] = (key, *ident)
            self._reindex_owners((key, *ident), old, obj)
            event = WatchEvent("MODIFIED" if old is not None else "ADDED", self._rv, obj, old)
            self._emit(key, event)
            return event

    def remove(self, key: str, namespace: str, name: str) -> WatchEvent | None:
        with self.lock:
            bucket = self._objects.get(key, {})
            old = bucket.pop((namespace, name), None)
            if old is None:
                return None
            self._rv += 1
            # The DELETED event carries the last state with the deletion's resourceVersion, as etcd does.
            final = dict(old)
            final["metadata"] = {**_meta(old), "resourceVersion": str(self._rv)}
            uid = _meta(old).get("uid", "")
            self._uids.pop(uid, None)
            if uid:
                self._deleted_uids.add(uid)
            self._reindex_owners((key, namespace, name), old, None)
            event = WatchEvent("DELETED", self._rv, final, old)
            self._emit(key, event)
            return event

    def snapshot(self) -> tuple[int, dict[str, list[dict[str, Any]]], list[str]]:
        """(resourceVersion, storage key -> objects, uids of deleted objects): what `restore` takes.

        The objects are the stored ones (never mutated in place), so the caller may serialize them
        outside the lock."""
        with self.lock:
            objects = {key: list(bucket.values()) for key, bucket in self._objects.items() if bucket}
            return self._rv, objects, sorted(self._deleted_uids)

    def restore(
        self, resource_version: int, objects: dict[str, list[dict[str, Any]]], deleted_uids: Iterable[str]
    ) -> None:
        """Put saved objects back as they were (their resourceVersions kept, no watch events: a
        restarted apiserver has no watchers yet) and continue the counter after the saved one, so
        every later write gets a resourceVersion no earlier state had. An object already stored
        under the same key and name is replaced."""
        with self.lock:
            for key, saved in objects.items():
                bucket = self._objects.setdefault(key, {})
                for obj in saved:
                    meta = _meta(obj)
                    ident = (meta.get("namespace") or "", meta["name"])
                    old = bucket.get(ident)
                    if old is not None:
                        self._uids.pop(_meta(old).get("uid", ""), None)
                    bucket[ident] = obj
                    if isinstance(meta.get("uid"), str):
                        self._uids[meta["uid"]] = (key, *ident)
                    self._reindex_owners((key, *ident), old, obj)
                    self._rv = max(self._rv, int(meta.get("resourceVersion") or 0))
            self._deleted_uids.update(deleted_uids)
            self._rv = max(self._rv, resource_version)
            # A watch resuming from before the restore would miss what happened in between.
            self._history_starts = self._rv

    def key_of_uid(self, uid: str) -> ObjectKey | None:
        with self.lock:
            return self._uids.get(uid)

    def was_deleted(self, uid: str) -> bool:
        """Whether an object with this uid existed and was deleted."""
        with self.lock:
            return uid in self._deleted_uids

    def in_namespace(self, namespace: str) -> list[ObjectKey]:
        """Every object stored in `namespace`, across all resources (namespace deletion needs it)."""
        with self.lock:
            return sorted(
                (key, ns, name)
                for key, bucket in self._objects.items()
                for (ns, name) in bucket
                if ns == namespace
            )

    def dependents(self, owner_uid: str) -> list[ObjectKey]:
        with self.lock:
            return sorted(self._dependents.get(owner_uid, ()))

    def subscribe(
        self, key: str, subscriber: Subscriber, *, since: int | None
    ) -> tuple[list[WatchEvent], int]:
        """Start a watch: returns what it must send first and the resourceVersion it starts at.

        `since=None` means "current state": a synthetic ADDED per existing object. Otherwise the
        logged events after `since` are replayed; if some were already evicted from the log the
        watch cannot be resumed and 410 Expired is raised, as the apiserver's watch cache does.
        """
        with self.lock:
            if since is None:
                objects, rv = self.list_objects(key)
                initial = [WatchEvent("ADDED", int(_meta(o)["resourceVersion"]), o) for o in objects]
            else:
                oldest = max(self._evicted_up_to.get(key, 0), self._history_starts)
                if since < oldest:
                    raise errors.expired(f"too old resource version: {since} ({oldest})")
                initial = [e for e in self._log.get(key, ()) if e.rv > since]
                rv = self._rv
            self._subscribers.setdefault(key, set()).add(subscriber)
            return initial, rv

    def unsubscribe(self, key: str, subscriber: Subscriber) -> None:
        with self.lock:
            self._subscribers.get(key, set()).discard(subscriber)

    def subscribers(self, key: str) -> Iterable[Subscriber]:
        with self.lock:
            return list(self._subscribers.get(key, ()))

    def _emit(self, key: str, event: WatchEvent) -> None:
        log = self._log.get(key)
        if log is None:
            log = self._log[key] = deque(maxlen=self._event_log_size)
        if len(log) == log.maxlen:
            self._evicted_up_to[key] = log[0].rv
        log.append(event)
        for subscriber in list(self._subscribers.get(key, ())):
            subscriber.offer(event)

    def _reindex_owners(
        self, ident: ObjectKey, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        before = _owner_uids(old) if old else set()
        after = _owner_uids(new) if new else set()
        for uid in before - after:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard(ident)
                if not deps:
                    del self._dependents[uid]
        for uid in after - before:
            self._dependents.setdefault(uid, set()).add(ident)
