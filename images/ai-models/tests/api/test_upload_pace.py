"""The pace an upload must keep (pure: the clock is an argument): minimum rate per window, idle
limit, a deadline from the size, and when the receiver must look again."""

from __future__ import annotations

import pytest

from ai_models.api.upload.pace import Pace, PaceFailure, UploadLimits

LIMITS = UploadLimits(
    idle_timeout_seconds=30, min_bytes_per_second=1000, rate_window_seconds=10, max_seconds=3600
)


def test_an_upload_at_the_minimum_rate_passes_every_window() -> None:
    pace = Pace(limits=LIMITS, started=0.0)
    for second in range(1, 101):
        pace.received_bytes(1000, now=float(second))
        pace.check(now=float(second))
    assert pace.received == 100_000


def test_a_window_below_the_minimum_rate_cuts_the_upload_off() -> None:
    pace = Pace(limits=LIMITS, started=0.0)
    for second in range(1, 10):
        pace.received_bytes(999, now=float(second))  # a byte a second short
    pace.check(now=9.9)
    with pytest.raises(PaceFailure, match="sent 8991 bytes in 10 s, below the minimum rate of 1000 bytes/s"):
        pace.check(now=10.0)


def test_a_trickle_never_trips_the_idle_limit_but_the_rate_catches_it() -> None:
    pace = Pace(limits=LIMITS, started=0.0)
    pace.received_bytes(1, now=5.0)
    pace.check(now=5.0)
    with pytest.raises(PaceFailure, match="below the minimum rate"):
        pace.check(now=10.0)


def test_silence_trips_the_idle_limit() -> None:
    limits = UploadLimits(
        idle_timeout_seconds=5, min_bytes_per_second=0, rate_window_seconds=10, max_seconds=3600
    )
    pace = Pace(limits=limits, started=0.0)
    pace.received_bytes(10, now=1.0)
    pace.check(now=5.9)
    with pytest.raises(PaceFailure, match="sent nothing for 5 s"):
        pace.check(now=6.0)


@pytest.mark.parametrize(
    ("size", "deadline"),
    [(None, 3600.0), (10_000, 30.0), (10_000_000, 3600.0), (0, 20.0)],
)
def test_the_deadline_comes_from_the_size_at_the_minimum_rate_within_the_maximum(
    size: int | None, deadline: float
) -> None:
    assert LIMITS.duration_for(size) == deadline
    pace = Pace(limits=LIMITS, started=100.0, size_bytes=size)
    assert pace.deadline == 100.0 + deadline


def test_a_fast_upload_still_ends_at_its_deadline() -> None:
    pace = Pace(limits=LIMITS, started=0.0, size_bytes=10_000)  # 30 s at the minimum rate
    for second in range(1, 30):
        pace.received_bytes(5000, now=float(second))
        pace.check(now=float(second))
    with pytest.raises(PaceFailure, match="deadline of 30 s"):
        pace.check(now=30.0)


def test_the_receiver_looks_again_at_the_earliest_decision() -> None:
    pace = Pace(limits=LIMITS, started=0.0, size_bytes=10_000)
    assert pace.wait_seconds(now=0.0) == 10.0  # the window ends first
    pace.received_bytes(20_000, now=9.0)
    pace.check(now=10.0)  # a new window starts at 10
    assert pace.wait_seconds(now=12.0) == 8.0
    assert pace.wait_seconds(now=21.0) == 0.0  # the window ended at 20 and was not judged yet
    pace.received_bytes(20_000, now=19.0)
    pace.check(now=21.0)
    assert pace.wait_seconds(now=29.5) == 0.5  # the deadline at 30 s comes before the window's end
    assert pace.wait_seconds(now=31.0) == 0.0
