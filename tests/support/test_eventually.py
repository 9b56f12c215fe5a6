"""`support.eventually`, on an injected clock: no test here waits for real time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from support.eventually import eventually


class FakeClock:
    """A monotonic clock that moves only when the helper sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def answers(*values: object) -> Callable[[], object]:
    it: Iterator[object] = iter(values)
    return lambda: next(it)


def test_returns_the_first_truthy_value_and_polls_at_the_interval() -> None:
    clock = FakeClock()
    found = eventually(answers(None, [], {"phase": "Ready"}), interval=0.5, clock=clock, sleep=clock.sleep)
    assert found == {"phase": "Ready"}
    assert clock.sleeps == [0.5, 0.5]


def test_a_check_that_raises_assertion_error_is_retried_until_it_passes() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        assert len(calls) >= 3, "not yet"
        return True

    assert eventually(check, clock=clock, sleep=clock.sleep) is True
    assert len(calls) == 3


def test_timeout_names_what_was_awaited_and_the_last_failed_check() -> None:
    clock = FakeClock()

    def check() -> bool:
        raise AssertionError(f"phase is Pending at {clock.now:g}")

    with pytest.raises(AssertionError) as failure:
        eventually(check, timeout=2, interval=0.5, message="m1 Ready", clock=clock, sleep=clock.sleep)
    text = str(failure.value)
    assert "timed out after 2 s waiting for m1 Ready" in text
    assert "last check: phase is Pending at 102" in text
    assert sum(clock.sleeps) == pytest.approx(2)


def test_message_may_be_computed_when_the_wait_times_out() -> None:
    clock = FakeClock()
    state = {"phase": "Pending"}

    def describe() -> str:
        return f"Ready (now {state['phase']})"

    def condition() -> bool:
        state["phase"] = "Publishing"
        return False

    with pytest.raises(AssertionError, match=r"waiting for Ready \(now Publishing\)"):
        eventually(condition, timeout=1, message=describe, clock=clock, sleep=clock.sleep)


def test_the_last_sleep_stops_at_the_deadline() -> None:
    clock = FakeClock()
    with pytest.raises(AssertionError):
        eventually(lambda: False, timeout=1, interval=0.4, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == pytest.approx([0.4, 0.4, 0.2])


def test_other_exceptions_fail_at_once() -> None:
    clock = FakeClock()

    def broken() -> bool:
        raise KeyError("status")

    with pytest.raises(KeyError):
        eventually(broken, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_a_met_condition_is_checked_once_even_with_no_time_left() -> None:
    clock = FakeClock()
    assert eventually(lambda: "done", timeout=0, clock=clock, sleep=clock.sleep) == "done"


def test_nonsense_timing_is_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        eventually(lambda: True, interval=0)
