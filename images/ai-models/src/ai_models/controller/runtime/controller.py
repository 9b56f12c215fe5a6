"""One controller: a work queue of keys, N workers, and the informers whose changes enqueue keys.

`reconcile(key)` is level-triggered: it reads the current state, moves it one step and returns
when to look again (seconds; None: only on the next change). An exception backs the key off
(per key, doubling), so one bad object never stops or floods the others; a pass that returns
resets its backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from ai_models.adapters.kube.informer import Informer
from ai_models.controller.runtime.observer import (
    NO_OBSERVER,
    RECONCILE_ERROR,
    RECONCILE_REQUEUE_AFTER,
    RECONCILE_SUCCESS,
    ControllerObserver,
)
from ai_models.controller.runtime.queue import WorkQueue
from ai_models.domain.backoff import Backoff

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
Reconcile = Callable[[K], float | None]
KeysOf = Callable[[Mapping[str, Any]], Iterable[K]]
DEFAULT_BACKOFF = Backoff()


class Controller(Generic[K]):
    def __init__(
        self,
        name: str,
        reconcile: Reconcile[K],
        *,
        workers: int = 1,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        self.name = name
        self._reconcile = reconcile
        self._workers = workers
        self._observer: ControllerObserver = NO_OBSERVER
        self.queue: WorkQueue[K] = WorkQueue(
            backoff=backoff,
            on_added=lambda: self._observer.queue_added(name),
            on_retried=lambda: self._observer.queue_retried(name),
        )
        # Set when the controller stops: long passes (an indexing run) end at their next checkpoint.
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def observe_with(self, observer: ControllerObserver) -> None:
        """Report the queue and every reconcile to `observer` from now on."""
        self._observer = observer
        observer.watch_queue(self.name, self.queue.__len__)

    def watch(self, informer: Informer, keys_of: KeysOf[K]) -> None:
        """Enqueue `keys_of(obj)` for the object of every change `informer` sees (the new one, or
        the deleted one)."""

        def changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
            obj = new if new is not None else old
            if obj is not None:
                for key in keys_of(obj):
                    self.queue.add(key)

        informer.add_handler(changed)

    def enqueue(self, key: K) -> None:
        self.queue.add(key)

    def start(self) -> None:
        self.stopping.clear()
        self._threads = [
            threading.Thread(target=self._work, name=f"{self.name}-{index}", daemon=True)
            for index in range(self._workers)
        ]
        for thread in self._threads:
            thread.start()
        log.info("controller started", extra={"controller": self.name, "workers": self._workers})

    def stop(self) -> None:
        self.stopping.set()
        self.queue.close()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the workers to finish their current keys; all finished?"""
        for thread in self._threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in self._threads)

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            started = time.monotonic()
            try:
                again = self._reconcile(key)
            except Exception:
                self._observer.reconciled(self.name, RECONCILE_ERROR, time.monotonic() - started)
                delay = self.queue.add_rate_limited(key)
                log.exception(
                    "reconcile failed; retrying",
                    extra={"controller": self.name, "object": str(key), "retry_in_seconds": delay},
                )
                continue
            finally:
                self.queue.done(key)
            self._observer.reconciled(
                self.name,
                RECONCILE_SUCCESS if again is None else RECONCILE_REQUEUE_AFTER,
                time.monotonic() - started,
            )
            self.queue.forget(key)
            if again is not None:
                self.queue.add_after(key, again)
