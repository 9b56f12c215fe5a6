"""Several files stored at once: while one file waits on its final flush (or on the network),
another is moving bytes, and each one's hash runs on a core of its own.

    results = run_parallel([lambda: store_one(a), lambda: store_one(b)], workers=files_at_once(store),
                           progress=progress)

The first failure stops the rest: tasks not started are dropped, running ones are cancelled
through `progress` (their next byte raises `Cancelled`), and the failure is raised once every
thread has ended, so nothing writes behind the caller's back.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TypeVar

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.publish.progress import Cancelled, Progress

T = TypeVar("T")

DIRECTORY_FILES_AT_ONCE = 2  # two in flight hide one's flush; more would only contend


def files_at_once(store: ObjectStore) -> int:
    """How many files to store at once. Two into a directory, where each write ends in a flush to
    disk that another file's bytes can overlap. One into S3: its uploads already send the parts
    of one file concurrently and hold about (concurrency + 1) parts of each stream in memory, so a
    second stream would double the memory for little speed."""
    return DIRECTORY_FILES_AT_ONCE if isinstance(store, DirectoryStore) else 1


def run_parallel(tasks: Sequence[Callable[[], T]], *, workers: int, progress: Progress) -> list[T]:
    if workers <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="publish") as pool:
        futures = [pool.submit(task) for task in tasks]
        concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        failed = next(
            (future for future in futures if future.done() and future.exception() is not None), None
        )
        if failed is not None:
            progress.cancel()
            for future in futures:
                future.cancel()
            concurrent.futures.wait(futures)
            error = failed.exception()
            assert error is not None
            raise error
        return [future.result() for future in futures]


__all__ = ["Cancelled", "files_at_once", "run_parallel"]
