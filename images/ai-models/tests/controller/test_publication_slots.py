"""The publication slot keeper: a Job counts as running from the moment this process creates it,
before the Job cache shows it, and the last slot goes to one worker only."""

from __future__ import annotations

import threading
from typing import Any

from ai_models.controller.jobs.slots import SlotKeeper


def job(name: str, *, uid: str = "", finished: bool = False, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": uid or f"uid-{name}"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-01T22:00:00Z"
    conditions = [{"type": "Complete", "status": "True"}] if finished else []
    return {"metadata": metadata, "status": {"conditions": conditions}}


def test_a_job_created_here_counts_before_the_cache_shows_it() -> None:
    cache: list[dict[str, Any]] = []
    slots = SlotKeeper(limit=2, job_cache=lambda: cache)
    assert slots.acquire("publish-a") == (True, 1)
    assert slots.acquire("publish-b") == (True, 2)
    assert slots.acquire("publish-c") == (False, 2)  # the cache is still empty
    assert slots.running() == 2


def test_the_cache_takes_over_once_it_shows_the_job() -> None:
    cache: list[dict[str, Any]] = []
    slots = SlotKeeper(limit=1, job_cache=lambda: cache)
    assert slots.acquire("publish-a")[0]
    cache.append(job("publish-a", finished=True))
    assert slots.running() == 0
    assert slots.acquire("publish-b") == (True, 1)


def test_jobs_running_in_the_cache_take_slots_and_finished_or_deleted_ones_do_not() -> None:
    cache = [job("publish-a"), job("publish-b", finished=True), job("publish-c", deleting=True)]
    slots = SlotKeeper(limit=2, job_cache=lambda: cache)
    assert slots.running() == 1
    assert slots.acquire("publish-d") == (True, 2)
    assert slots.acquire("publish-e") == (False, 2)


def test_a_released_slot_is_free_again() -> None:
    slots = SlotKeeper(limit=1, job_cache=list)
    assert slots.acquire("publish-a")[0]
    slots.release("publish-a")
    assert slots.acquire("publish-b") == (True, 1)


def test_the_same_job_asked_twice_takes_one_slot() -> None:
    slots = SlotKeeper(limit=1, job_cache=list)
    assert slots.acquire("publish-a") == (True, 1)
    assert slots.acquire("publish-a") == (True, 1)


def test_the_last_slot_goes_to_one_of_many_workers_at_once() -> None:
    cache: list[dict[str, Any]] = []
    slots = SlotKeeper(limit=4, job_cache=lambda: cache)
    start = threading.Barrier(16)
    taken: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        start.wait()
        if slots.acquire(f"publish-{index}")[0]:
            with lock:
                taken.append(f"publish-{index}")

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 4
    assert slots.running() == 4


def test_a_job_removed_here_is_ended_until_the_cache_drops_it() -> None:
    cache = [job("publish-a", uid="1", finished=True)]
    slots = SlotKeeper(limit=1, job_cache=lambda: cache)
    slots.ended("1")
    assert slots.is_ended("1")
    cache.clear()
    slots.running()  # the next look at the cache forgets what it no longer shows
    assert not slots.is_ended("1")
    cache.append(job("publish-a", uid="2"))  # the same name again is another Job
    assert not slots.is_ended("2")
