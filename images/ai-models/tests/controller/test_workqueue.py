"""The controller's work queue: dedup, one holder per key, re-queue after `done`, delayed adds,
per-key backoff."""

from __future__ import annotations

import collections
import random
import threading
import time

from ai_models.controller.runtime import Controller
from ai_models.controller.runtime.queue import WorkQueue
from ai_models.domain.backoff import Backoff

WAIT = 10.0  # generous bound for "promptly"; tests finish as soon as the awaited thing happens


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key available now, each marked done right away."""
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def get_in_thread(queue: WorkQueue[str], timeout: float | None) -> tuple[threading.Thread, list[str | None]]:
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get(timeout=timeout)), daemon=True)
    thread.start()
    return thread, result


# ----- dedup and ownership ---------------------------------------------------------------------


def test_adds_of_a_queued_key_collapse_into_one_pass_in_first_add_order() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "c", "b", "a"):
        queue.add(key)
    assert len(queue) == 3
    assert drain(queue) == ["a", "b", "c"]
    assert len(queue) == 0


def test_a_key_added_while_processing_is_held_back_until_done_then_requeued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0
    assert queue.get(timeout=0) is None  # never handed out while its holder works on it
    queue.done("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_done_without_a_new_add_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None


def test_many_workers_never_hold_one_key_at_once_and_every_add_is_seen() -> None:
    """Producers bump a key's version, then add it; a pass records the version it started from.

    Level-triggered correctness: after the last add, some pass of that key starts later, so every
    key's last seen version catches up with its last version. Holding one key twice would show in
    the per-key holder counter.
    """
    keys = list(range(6))
    lock = threading.Lock()
    caught_up = threading.Condition(lock)
    holders: collections.Counter[int] = collections.Counter()
    most_holders = dict.fromkeys(keys, 0)
    most_keys_at_once = 0
    version = dict.fromkeys(keys, 0)
    seen = dict.fromkeys(keys, 0)
    passes = 0

    def work(key: int) -> float | None:
        nonlocal most_keys_at_once, passes
        with lock:
            holders[key] += 1
            most_holders[key] = max(most_holders[key], holders[key])
            most_keys_at_once = max(most_keys_at_once, sum(1 for count in holders.values() if count))
            started_at = version[key]
            passes += 1
        time.sleep(0.0005)  # widen the window in which a second holder would be caught
        with lock:
            holders[key] -= 1
            seen[key] = max(seen[key], started_at)
            caught_up.notify_all()
        return None

    def produce(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(1500):
            key = rng.choice(keys)
            with lock:
                version[key] += 1
            queue.add(key)
            if rng.random() < 0.05:
                time.sleep(0)

    controller: Controller[int] = Controller("stress", work, workers=8)
    queue = controller.queue
    controller.start()
    producers = [threading.Thread(target=produce, args=(seed,)) for seed in range(4)]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(WAIT)
    with lock:
        assert caught_up.wait_for(lambda: seen == version, timeout=WAIT), (seen, version)
        assert most_holders == dict.fromkeys(keys, 1)
        assert most_keys_at_once > 1  # the workers did run side by side
        assert passes <= sum(version.values())
    controller.stop()
    assert controller.join(WAIT)


# ----- delayed adds ------------------------------------------------------------------------------


def test_delayed_keys_are_promoted_in_due_order_when_the_clock_reaches_them() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("c", 30)
    queue.add_after("a", 10)
    queue.add_after("b", 20)
    queue.add_after("d", 20)  # same due time as b: first asked, first served
    assert drain(queue) == []
    clock.advance(9.5)
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["a"]
    clock.advance(15)
    assert drain(queue) == ["b", "d"]
    clock.advance(5)
    assert drain(queue) == ["c"]
    assert drain(queue) == []


def test_add_after_without_a_positive_delay_adds_now() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add_after("a", 0)
    queue.add_after("b", -3)
    assert drain(queue) == ["a", "b"]


def test_repeated_add_after_of_one_key_keeps_only_the_earliest_due_time() -> None:
    """As client-go: a later delay does not postpone, an earlier one advances; one pass in all.

    Otherwise every reconcile that asks to be looked at again starts one more periodic chain.
    """
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    queue.add_after("a", 30)
    queue.add_after("a", 5)
    clock.advance(5)
    assert drain(queue) == ["a"]
    clock.advance(100)
    assert drain(queue) == []


def test_a_delayed_add_of_a_queued_key_is_absorbed_by_the_pending_pass() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add_after("a", 1)
    clock.advance(1)
    assert drain(queue) == ["a"]
    assert drain(queue) == []


def test_a_delayed_add_that_falls_due_while_processing_requeues_after_done() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 1)
    clock.advance(1)
    assert queue.get(timeout=0) is None
    queue.done("a")
    assert drain(queue) == ["a"]


def test_a_blocked_get_wakes_for_a_delayed_key_when_it_is_due() -> None:
    queue: WorkQueue[str] = WorkQueue()
    thread, result = get_in_thread(queue, timeout=WAIT)
    started = time.monotonic()
    queue.add_after("a", 0.05)
    thread.join(WAIT)
    assert result == ["a"]
    assert time.monotonic() - started >= 0.05


# ----- get(timeout) and close --------------------------------------------------------------------


def test_get_returns_none_after_its_timeout_on_an_empty_queue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    started = time.monotonic()
    assert queue.get(timeout=0.05) is None
    assert 0.05 <= time.monotonic() - started < WAIT


def test_get_timeout_is_real_time_even_with_an_injected_clock() -> None:
    """A clock that does not move (a test's) must not turn a timeout into a wait forever."""
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add_after("later", 60)
    thread, result = get_in_thread(queue, timeout=0.05)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert result == [None]


def test_a_blocked_get_returns_a_key_added_by_another_thread() -> None:
    queue: WorkQueue[str] = WorkQueue()
    thread, result = get_in_thread(queue, timeout=None)
    queue.add("a")
    thread.join(WAIT)
    assert result == ["a"]


def test_close_wakes_every_waiter_and_ignores_later_adds() -> None:
    queue: WorkQueue[str] = WorkQueue()
    waiters = [get_in_thread(queue, timeout=None) for _ in range(3)]
    waiters[0][0].join(0.05)
    assert all(thread.is_alive() for thread, _ in waiters)
    queue.close()
    for thread, result in waiters:
        thread.join(WAIT)
        assert not thread.is_alive()
        assert result == [None]
    queue.add("a")
    queue.add_after("b", 0.01)
    assert len(queue) == 0
    assert queue.get(timeout=0.05) is None


def test_close_stops_handing_out_queued_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.close()
    assert queue.get(timeout=0) is None


# ----- per-key backoff ---------------------------------------------------------------------------


def test_a_failing_key_waits_longer_each_time_until_it_is_forgotten() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(base=1.0, cap=4.0))
    delays = [queue.add_rate_limited("bad") for _ in range(4)]
    assert delays == [1.0, 2.0, 4.0, 4.0]
    assert queue.failures("bad") == 4
    clock.advance(0.5)
    assert drain(queue) == []
    clock.advance(0.5)
    assert drain(queue) == ["bad"]  # the earliest due add wins, as with add_after
    queue.forget("bad")
    assert queue.failures("bad") == 0
    assert queue.add_rate_limited("bad") == 1.0


def test_backoff_of_one_key_leaves_the_others_alone() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, backoff=Backoff(base=10.0, cap=60.0))
    queue.add_rate_limited("bad")
    queue.add("good")
    assert drain(queue) == ["good"]
    assert queue.failures("good") == 0
