"""Publication slots (`publication.maxConcurrentPublications`), kept by the one process that
creates publication Jobs: the leader.

The Job cache alone cannot say how many publications run: it lags the Jobs this process has just
created, and several workers may look at it at the same moment, each seeing a free slot (8 Models
applied at once ran 6 Jobs against a limit of 4). So a publication counts as running while the
cache shows its Job running, or while this process created it and the cache has not shown it
yet; and a slot is taken under one lock, so two workers never take the last one.

The same lag would show a finished Job this process has just removed as still there, and its
result would be counted twice; such a Job is reported as ended until the cache drops it.

Publication Jobs live in one namespace and are told apart by name; materialization Jobs
(`delivery.maxConcurrentMaterializations`) live in the workloads' namespaces, so their keeper
names a Job by `job_key` (`namespace/name`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from ai_models.domain.jobs import is_running


def job_name(job: Mapping[str, Any]) -> str:
    return str(job["metadata"]["name"])


def namespaced_job_name(job: Mapping[str, Any]) -> str:
    return f"{job['metadata'].get('namespace') or ''}/{job['metadata']['name']}"


K = TypeVar("K", bound=Hashable)


class SlotWaiters(Generic[K]):
    """The keys that found every slot taken; when one frees, all of them look again (the first
    to get there takes it). Shared by the workers of one controller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[K] = set()
        self.on_slot_freed: Callable[[set[K]], None] = lambda keys: None

    def waiting_for_slot(self, key: K) -> None:
        with self._lock:
            self._waiting.add(key)

    def got_slot(self, key: K) -> None:
        with self._lock:
            self._waiting.discard(key)

    def slot_freed(self) -> None:
        with self._lock:
            waiting = set(self._waiting)
        if waiting:
            self.on_slot_freed(waiting)


class SlotKeeper:
    def __init__(
        self,
        *,
        limit: int,
        job_cache: Callable[[], Iterable[Mapping[str, Any]]],
        job_key: Callable[[Mapping[str, Any]], str] = job_name,
    ) -> None:
        self.limit = limit
        self._job_cache = job_cache
        self._job_key = job_key
        self._lock = threading.Lock()
        self._created: set[str] = set()  # Job names created here that the cache has not shown yet
        self._ended: set[str] = set()  # uids of Jobs removed here that the cache still shows

    def running(self) -> int:
        with self._lock:
            return len(self._running())

    def acquire(self, job: str) -> tuple[bool, int]:
        """Take a slot for the Job named `job` (about to be created); (taken, publications running)."""
        with self._lock:
            running = self._running()
            if job in running:
                return True, len(running)  # a Job of this name runs or is being created already
            if len(running) >= self.limit:
                return False, len(running)
            self._created.add(job)
            return True, len(running) + 1

    def release(self, job: str) -> None:
        """The Job was not created after all, or it was removed."""
        with self._lock:
            self._created.discard(job)

    def ended(self, job_uid: str) -> None:
        """This process removed the Job: its result is taken, whatever the cache still says."""
        with self._lock:
            self._ended.add(job_uid)

    def is_ended(self, job_uid: str) -> bool:
        with self._lock:
            return job_uid in self._ended

    def _running(self) -> set[str]:
        cached = list(self._job_cache())
        shown = {self._job_key(job) for job in cached}
        # Once the cache shows a Job, the cache says whether it runs; once it drops one, it no
        # longer shows a Job removed here.
        self._created -= shown
        self._ended &= {str(job["metadata"].get("uid", "")) for job in cached}
        return {self._job_key(job) for job in cached if is_running(job)} | self._created
