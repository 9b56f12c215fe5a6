"""The one backoff rule: base after the first failure, doubling, never above the cap."""

from __future__ import annotations

import datetime as dt

import pytest

from ai_models.domain.backoff import Backoff


def test_the_wait_doubles_from_the_base_and_stops_at_the_cap() -> None:
    backoff = Backoff(base=2.0, cap=30.0)
    assert [backoff.delay(failures) for failures in range(7)] == [0.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize("failures", [63, 64, 1_000, 10**9])
def test_any_number_of_failures_waits_the_cap_without_overflow(failures: int) -> None:
    assert Backoff(base=0.5, cap=600.0).delay(failures) == 600.0


def test_the_timedelta_form_is_the_same_rule() -> None:
    backoff = Backoff.between(dt.timedelta(seconds=10), dt.timedelta(minutes=10))
    assert backoff == Backoff(base=10.0, cap=600.0)
    assert [backoff.after(failures) for failures in (0, 1, 3, 20)] == [
        dt.timedelta(0),
        dt.timedelta(seconds=10),
        dt.timedelta(seconds=40),
        dt.timedelta(minutes=10),
    ]
