"""What a controller tells whoever watches it (the controller's metrics, controller/metrics.py):
its queue's depth, adds and retries, and each reconcile's result and duration.

The runtime knows no metrics library: `Manager(observer=...)` hands the observer to every
controller it runs; without one nothing is observed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

# The `result` of a reconcile, as controller-runtime names them.
RECONCILE_SUCCESS: Final = "success"
RECONCILE_ERROR: Final = "error"
RECONCILE_REQUEUE_AFTER: Final = "requeue_after"


class ControllerObserver(Protocol):
    def watch_queue(self, controller: str, depth: Callable[[], int]) -> None:
        """`depth()` is the number of keys waiting in `controller`'s queue, read when asked."""

    def queue_added(self, controller: str) -> None:
        """A key entered the queue (an add of a key already waiting is not one)."""

    def queue_retried(self, controller: str) -> None:
        """A failed key was put back after its backoff."""

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        """One reconcile ended with `result` after `seconds`."""


class NoObserver:
    def watch_queue(self, controller: str, depth: Callable[[], int]) -> None:
        return None

    def queue_added(self, controller: str) -> None:
        return None

    def queue_retried(self, controller: str) -> None:
        return None

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        return None


NO_OBSERVER: Final = NoObserver()
