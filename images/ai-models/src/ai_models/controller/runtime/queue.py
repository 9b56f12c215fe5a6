"""A deduplicating work queue with delayed adds and per-key backoff, as client-go's: one key is never
worked on twice at once, a key added while it is being worked on is worked on again afterwards, and
a key that keeps failing waits longer each time (`add_rate_limited`) until it succeeds (`forget`).

Reconcilers are level-triggered: a key says "look at this object again", not what changed, so any
number of adds before a worker picks the key up collapse into one pass.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from ai_models.domain.backoff import Backoff

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
        on_added: Callable[[], None] = lambda: None,
        on_retried: Callable[[], None] = lambda: None,
    ) -> None:
        self._clock = clock
        self._backoff = backoff or Backoff()
        self._on_added = on_added
        self._on_retried = on_retried
        self._failures: dict[K, int] = {}
        self._condition = threading.Condition()
        self._queue: list[K] = []
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}  # key -> when its delayed add is due (the earliest asked)
        self._sequence = itertools.count()
        self._closed = False

    def add(self, key: K) -> None:
        with self._condition:
            if self._closed or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._condition.notify()
        self._on_added()

    def add_after(self, key: K, seconds: float) -> None:
        if seconds <= 0:
            self.add(key)
            return
        with self._condition:
            if self._closed:
                return
            due = self._clock() + seconds
            earlier = self._waiting.get(key)
            if earlier is not None and earlier <= due:
                return  # already due no later than that: one pass covers both, as in client-go
            self._waiting[key] = due
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            self._condition.notify()

    def add_rate_limited(self, key: K) -> float:
        """Look at `key` again after its backoff, one step longer than the last; the delay chosen."""
        with self._condition:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
        self._on_retried()
        delay = self._backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """`key` succeeded: its next failure starts the backoff again from the base."""
        with self._condition:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._condition:
            return self._failures.get(key, 0)

    def _promote_due(self) -> float | None:
        """Move due delayed keys into the queue; the seconds until the next one, if any."""
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._waiting.get(key) != due:
                continue  # superseded by an earlier add_after of the same key
            del self._waiting[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
                self._on_added()
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> K | None:
        """The next key (now owned by the caller until `done`), or None on timeout or close."""
        # The timeout is real time, as `Condition.wait` measures it, whatever the injected clock.
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while True:
                wait = self._promote_due()
                if self._closed:
                    return None
                if self._queue:
                    key = self._queue.pop(0)
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._condition.wait(wait)

    def done(self, key: K) -> None:
        with self._condition:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._condition.notify()

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def __len__(self) -> int:
        with self._condition:
            return len(self._queue)
