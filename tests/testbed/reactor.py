"""The watch-and-reconcile loop the newer stand-in controllers share (workloads, scheduler, volumes).

A `StoreReactor` subscribes to some resource types of the emulator's store (the current objects
as ADDED, then every change: a watch, never polling), maps each event to the keys it concerns
(`keys_for`) and, once the queue is drained, reconciles each dirty key once (`reconcile`), reading
the store as it is then. That is level-triggered, like a real controller: a missed intermediate
state does not matter, the next reconcile sees the latest one. One thread per reactor; writes go
through `cluster.create/update/delete` (status through the status subresource), each under the
store lock only for its own read-modify-write, so no other writer slips in between.

Waits (`wait_for`) wake on the reactor's own progress: every handled batch bumps a generation.
"""

from __future__ import annotations

import abc
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

from kubeemu import errors
from kubeemu.cluster import Cluster
from kubeemu.resources import ResourceType
from kubeemu.store import WatchEvent

T = TypeVar("T")
_KICK = "__kick__"
# A write that met a conflict is retried after this long (a real controller's rate limiter).
_CONFLICT_RETRY_SECONDS = 0.05

Item = tuple[str, Any]


@dataclass(eq=False)
class _Feed:
    """A store subscriber: hands events to the reactor's thread, never blocks the writer."""

    kind: str
    events: queue.SimpleQueue[Item | None]

    def offer(self, event: WatchEvent) -> None:
        self.events.put((self.kind, event))


def meta(obj: Any) -> dict[str, Any]:
    found = obj.get("metadata") if isinstance(obj, dict) else None
    return found if isinstance(found, dict) else {}


def key_of(obj: dict[str, Any]) -> tuple[str, str]:
    return meta(obj).get("namespace", "") or "", meta(obj).get("name", "")


def controller_uid(obj: dict[str, Any]) -> str:
    """The uid of the object's controller (the ownerReference with `controller: true`), or ""."""
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta(owner)["name"],
        "uid": meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class StoreReactor(abc.ABC):
    """Subclasses set `watched` ((group, version, plural) triples), implement `keys_for` and
    `reconcile`, and call `start()` at the end of their `__init__`."""

    name = "reactor"

    def __init__(self, cluster: Cluster, *, watched: Sequence[tuple[str, str, str]]) -> None:
        self.cluster = cluster
        self.types: dict[str, ResourceType] = {}
        for group, version, plural in watched:
            rtype = cluster.resource(group, version, plural)
            assert rtype is not None, f"the emulator does not serve {plural}"
            self.types[plural] = rtype
        self._events: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
        self._feeds = [_Feed(plural, self._events) for plural in self.types]
        self._changed = threading.Condition(threading.RLock())
        self._generation = 0
        self._closed = False
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._loop, name=f"testbed-{self.name}", daemon=True)
        self._log = logging.getLogger(f"testbed.{self.name}")

    def start(self) -> None:
        store = self.cluster.store
        # Subscribing and queueing the current state under the store lock: no write can slip its
        # event in ahead of the synthetic ADDED events of the objects that exist already.
        with store.lock:
            for feed in self._feeds:
                initial, _ = store.subscribe(self.types[feed.kind].storage_key, feed, since=None)
                for event in initial:
                    self._events.put((feed.kind, event))
        self._thread.start()

    # --- for subclasses --------------------------------------------------------------------------

    @abc.abstractmethod
    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        """Which keys an event of `kind` concerns."""

    @abc.abstractmethod
    def reconcile(self, key: Any) -> None:
        """Bring `key` to what the store says it should be."""

    def kick(self, key: Hashable) -> None:
        """Reconcile `key` soon (a test changed what the reactor was configured with)."""
        self._events.put((_KICK, key))

    def kick_later(self, key: Hashable, seconds: float) -> None:
        timer = threading.Timer(seconds, self.kick, args=(key,))
        timer.daemon = True
        with self._changed:
            if self._closed:
                return
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def rtype(self, plural: str) -> ResourceType:
        return self.types[plural]

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.cluster.get(self.types[plural], namespace=namespace, name=name)
        except errors.APIError:
            return None

    def items(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        rtype = self.types[plural]
        with self.cluster.store.lock:
            stored, _ = self.cluster.store.list_objects(rtype.storage_key, namespace)
            return [self.cluster.served(rtype, o) for o in stored]

    def write_status(self, plural: str, obj: dict[str, Any], status: dict[str, Any]) -> None:
        """Replace the object's status (a no-op write when it is unchanged), if it is still the same
        object (uid) and not gone."""
        namespace, name = key_of(obj)
        with self.cluster.store.lock:
            current = self.get(plural, namespace, name)
            if current is None or meta(current).get("uid") != meta(obj).get("uid"):
                return
            if current.get("status") == status:
                return
            self.cluster.update(
                self.types[plural],
                {"metadata": {"name": name, "namespace": namespace}, "status": status},
                namespace=namespace,
                name=name,
                subresource="status",
            )

    def delete(self, plural: str, obj: dict[str, Any]) -> None:
        namespace, name = key_of(obj)
        with self.cluster.store.lock:
            current = self.get(plural, namespace, name)
            if current is None or meta(current).get("uid") != meta(obj).get("uid"):
                return
            self.cluster.delete(self.types[plural], namespace=namespace, name=name)

    # --- waits and lifecycle ---------------------------------------------------------------------

    def wait_for(
        self, read: Callable[[], T], check: Callable[[T], bool], *, timeout: float = 30, what: str
    ) -> T:
        """Wait until `check(read())`, re-reading after each batch the reactor handles."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            current = read()
            if check(current):
                return current
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; now:\n{current}")
            with self._changed:
                self._changed.wait_for(functools.partial(self._moved_on, seen), remaining)
            if self._closed:
                raise AssertionError(f"the {self.name} was closed while waiting for {what}")

    def _moved_on(self, generation: int) -> bool:
        return self._generation != generation or self._closed

    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._changed:
            if self._closed:
                return
            self._closed = True
            timers = list(self._timers)
            self._changed.notify_all()
        for timer in timers:
            timer.cancel()
        for feed in self._feeds:
            self.cluster.store.unsubscribe(self.types[feed.kind].storage_key, feed)
        self._events.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _loop(self) -> None:
        while True:
            item = self._events.get()
            dirty: dict[Hashable, None] = {}
            while item is not None:
                kind, payload = item
                try:
                    keys = [payload] if kind == _KICK else list(self.keys_for(kind, payload))
                except Exception:  # one bad object must not stop the reactor
                    self._log.exception("%s: mapping a %s event failed", self.name, kind)
                    keys = []
                dirty.update(dict.fromkeys(keys))
                try:
                    item = self._events.get_nowait()
                except queue.Empty:
                    break
            if item is None or self.closed():
                return
            for key in dirty:
                if self.closed():
                    return
                try:
                    self.reconcile(key)
                except errors.APIError as error:
                    if error.code == 409:
                        self.kick_later(key, _CONFLICT_RETRY_SECONDS)
                    elif error.code != 404:
                        self._log.warning("%s: reconciling %s: %s", self.name, key, error)
                except Exception:
                    self._log.exception("%s: reconciling %s failed", self.name, key)
            with self._changed:
                self._generation += 1
                self._changed.notify_all()
