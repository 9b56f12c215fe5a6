"""The ModelCatalogSource reconciler on the controller runtime: read, decide, one step, requeue.

`reconcile(name)` reads the source from the informer's cache, makes the pure decision
(`domain.catalog.schedule.decide`) and runs its step: adopt the source, report that it waits for
its opt-in, run or resume an indexing pass, or clean up after its deletion. It goes on deciding
until the source only has to wait, and returns when to look again: the timer or the end of the
backoff, or None while it waits for a change (every change of the object enqueues it again).

The cache lags this reconciler's own writes by a watch event. Deciding on a cache that does not
show the status just written would take a finished pass's checkpoint for an interrupted pass, or
miss the backoff just written; so the object each write returns is used until the informer has
delivered that very version (`keys_of` sees it), or for ECHO_TIMEOUT at most (a relist may skip
it). Watch events arrive in resourceVersion order, so a cache that has not shown our write yet is
older than the object the write returned. The informer may show a write before the writer hears
back from the API, so the versions it showed lately are remembered too.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.controller.catalog import lifecycle, passes
from ai_models.controller.catalog.context import CatalogRuntime
from ai_models.controller.catalog.status import SourceStatusWriter, observe
from ai_models.domain.catalog.outcomes import StatusChange, invalid_sync_request, waiting_for_opt_in
from ai_models.domain.catalog.schedule import Action, decide, parse_sync_request
from ai_models.names import (
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CATALOG_SYNC_REQUESTED_AT_ANNOTATION,
)

log = logging.getLogger(__name__)
ECHO_TIMEOUT_SECONDS = 10.0
# Decisions one reconcile makes at most (adopt, pass, its outcome, sleep take four); past it the
# source is looked at again shortly instead of looping within one worker.
MAX_STEPS = 8
CONFLICT_RETRY_SECONDS = 0.5
SEEN_VERSIONS = 32  # versions of each source the informer showed lately


@dataclasses.dataclass
class _Written:
    version: str
    obj: dict[str, Any]
    at: float


@dataclasses.dataclass
class CatalogSourceReconciler:
    runtime: CatalogRuntime
    get_source: Callable[[str], dict[str, Any] | None]
    # The controller's own event, set when it stops: a running pass ends at its next checkpoint.
    stopping: threading.Event = dataclasses.field(default_factory=threading.Event)
    monotonic: Callable[[], float] = time.monotonic
    _written: dict[str, _Written] = dataclasses.field(default_factory=dict)
    _seen: dict[str, collections.deque[str]] = dataclasses.field(default_factory=dict)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    # ----- wiring -------------------------------------------------------------------------------

    def keys_of(self, obj: Mapping[str, Any]) -> list[str]:
        """The key of a changed source (its name), noting that the cache now shows that version."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return []
        version = str(meta.get("resourceVersion") or "")
        with self._lock:
            self._seen.setdefault(name, collections.deque(maxlen=SEEN_VERSIONS)).append(version)
            written = self._written.get(name)
            if written is not None and written.version == version:
                del self._written[name]
        return [name]

    def _remember(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name, version = str(meta["name"]), str(meta.get("resourceVersion") or "")
        with self._lock:
            if version in self._seen.get(name, ()):
                return  # the informer showed it before the API's answer reached us
            self._written[name] = _Written(version=version, obj=obj, at=self.monotonic())

    def echo_pending(self, name: str) -> float | None:
        """Seconds the reconciler still decides on its own last write of `name` (None: on the cache)."""
        with self._lock:
            written = self._written.get(name)
            if written is None:
                return None
            left = ECHO_TIMEOUT_SECONDS - (self.monotonic() - written.at)
        return left if left > 0 else None

    def _current(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            written = self._written.get(name)
            if written is not None:
                if self.monotonic() - written.at < ECHO_TIMEOUT_SECONDS:
                    return copy.deepcopy(written.obj)
                del self._written[name]
        return self.get_source(name)

    # ----- reconcile ----------------------------------------------------------------------------

    def reconcile(self, name: str) -> float | None:
        try:
            again = self._reconcile(name)
        except KubeError as error:
            if error.not_found:
                return None  # deleted meanwhile: nothing of it is left to look at
            if error.conflict:
                # Someone wrote the source since our view of it: look again at the newer one.
                log.info(
                    "the catalog source changed while it was written; looking again", extra={"source": name}
                )
                return CONFLICT_RETRY_SECONDS
            raise
        # Decided on our own write: should its echo never come (a relist skipped it), look again at
        # the cache once the write is no longer trusted, not only at the next change.
        pending = self.echo_pending(name)
        if pending is not None:
            return pending if again is None else min(again, pending)
        return again

    def _reconcile(self, name: str) -> float | None:
        for _ in range(MAX_STEPS):
            if self.stopping.is_set():
                return None
            obj = self._current(name)
            if obj is None:
                with self._lock:  # gone: nothing of it is worth remembering
                    self._seen.pop(name, None)
                return None
            now = self.runtime.clock()
            decision = decide(observe(obj), now=now)
            action = decision.action
            if action is Action.IDLE:
                return None
            if action is Action.ADOPT:
                self._remember(lifecycle.adopt(self.runtime, obj))
            elif action is Action.CLEAN_UP:
                lifecycle.clean_up(self.runtime, obj)
                return None
            elif action is Action.WAIT_FOR_OPT_IN:
                self._writer(obj).apply(_waiting_for_opt_in(obj), now=now)
                return None
            elif action is Action.SLEEP:
                if decision.invalid_sync_request is not None:
                    self._report_invalid_request(obj, decision.invalid_sync_request)
                return decision.requeue_after(now)
            else:
                passes.index(self.runtime, self._writer(obj), decision, should_stop=self._should_stop(obj))
        log.warning(
            "catalog source still changing after several steps; looking again soon", extra={"source": name}
        )
        return 1.0

    def _writer(self, obj: dict[str, Any]) -> SourceStatusWriter:
        return SourceStatusWriter(api=self.runtime.api, obj=obj, written=self._remember)

    def _report_invalid_request(self, obj: dict[str, Any], value: str) -> None:
        change = invalid_sync_request(value)
        writer = self._writer(obj)
        if writer.apply(change, now=self.runtime.clock()) and change.event is not None:
            event = change.event
            self.runtime.record_event(
                writer.obj, type_=event.type_, reason=event.reason, message=event.message
            )
            log.warning(
                "catalog sync request is not a timestamp", extra={"source": writer.name, "value": value[:64]}
            )

    def _should_stop(self, obj: Mapping[str, Any]) -> Callable[[], bool]:
        name = str(obj["metadata"]["name"])
        generation = obj["metadata"].get("generation")

        def should_stop() -> bool:
            # A spec change, the opt-in taken back, the source's deletion or the controller stopping
            # (losing the Lease) ends the pass at its last checkpoint.
            if self.stopping.is_set():
                return True
            cached = self.get_source(name)
            if cached is None:
                return True
            meta = cached["metadata"]
            opted_in = (meta.get("annotations") or {}).get(CATALOG_SYNC_ANNOTATION) == CATALOG_SYNC_ENABLED
            return not opted_in or bool(meta.get("deletionTimestamp")) or meta.get("generation") != generation

        return should_stop


def _waiting_for_opt_in(obj: Mapping[str, Any]) -> StatusChange:
    """What a source without the opt-in shows: an opt-in written another way (`enabled`) and a
    request that is not a timestamp are answered now, not only once the source opts in."""
    annotations = obj["metadata"].get("annotations") or {}
    written = annotations.get(CATALOG_SYNC_ANNOTATION)
    request = parse_sync_request(annotations.get(CATALOG_SYNC_REQUESTED_AT_ANNOTATION))
    return waiting_for_opt_in(
        served=bool((obj.get("status") or {}).get("servedGeneration")),
        value=None if written is None else str(written),
        invalid_request=request.invalid,
    )
