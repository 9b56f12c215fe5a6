"""Several files stored at once: while one file waits on its final flush (or on the network),
another is moving bytes, and each one's hash runs on a core of its own.

    results = run_parallel([lambda: store_one(a), lambda: store_one(b)], workers=2, progress=progress)

The first failure stops the rest: tasks not started are dropped, running ones are cancelled
through `progress` (their next byte raises `Cancelled`), and the failure is raised once every
thread has ended, so nothing writes behind the caller's back.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import TypeVar

from ai_models.publish.progress import Cancelled, Progress

T = TypeVar("T")

PARALLEL_FILES = 2  # two in flight hide one's flush; more would multiply the store's buffers


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


__all__ = ["PARALLEL_FILES", "Cancelled", "run_parallel"]
