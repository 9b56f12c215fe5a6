"""When a catalog source gets an indexing pass."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from ai_models.domain.catalog.schedule import (
    Action,
    SourceObservation,
    Trigger,
    backoff,
    decide,
    parse_duration,
)

NOW = datetime.datetime(2026, 11, 29, 20, 0, tzinfo=datetime.UTC)
HOUR = datetime.timedelta(hours=1)
SYNCED = SourceObservation(
    opted_in=True,
    generation=3,
    observed_generation=3,
    sync_interval=24 * HOUR,
    sync_requested_at=None,
    last_sync_start=NOW - 2 * HOUR,
    last_success=NOW - HOUR,
    has_checkpoint=False,
)


def with_(**changes: object) -> SourceObservation:
    return dataclasses.replace(SYNCED, **changes)  # type: ignore[arg-type]


def test_nothing_happens_before_the_opt_in_annotation() -> None:
    assert decide(with_(opted_in=False, last_success=None), now=NOW).action is Action.WAIT_FOR_OPT_IN


def test_first_sync_starts_as_soon_as_the_source_opts_in() -> None:
    fresh = with_(observed_generation=3, last_sync_start=None, last_success=None)
    assert (decide(fresh, now=NOW).action, decide(fresh, now=NOW).trigger) == (
        Action.START,
        Trigger.FIRST_SYNC,
    )


def test_spec_change_starts_a_fresh_pass_even_during_backoff_or_a_checkpoint() -> None:
    changed = with_(generation=4, has_checkpoint=True, retry_not_before=NOW + HOUR)
    assert (decide(changed, now=NOW).action, decide(changed, now=NOW).trigger) == (
        Action.START,
        Trigger.SPEC_CHANGED,
    )


def test_newer_request_annotation_starts_a_pass_and_an_old_one_does_not() -> None:
    newer = with_(sync_requested_at=NOW - datetime.timedelta(minutes=1))
    assert decide(newer, now=NOW).trigger is Trigger.SYNC_REQUESTED
    older = with_(sync_requested_at=NOW - 3 * HOUR)
    assert decide(older, now=NOW).action is Action.SLEEP


def test_interrupted_pass_resumes_from_its_checkpoint_after_the_backoff() -> None:
    interrupted = with_(has_checkpoint=True, last_sync_start=NOW - HOUR / 2)
    assert decide(interrupted, now=NOW).trigger is Trigger.INTERRUPTED
    waiting = with_(has_checkpoint=True, retry_not_before=NOW + HOUR)
    assert decide(waiting, now=NOW).action is Action.SLEEP
    assert decide(waiting, now=NOW).wake_at == NOW + HOUR


def test_failed_pass_without_checkpoint_is_retried_not_left_until_the_next_interval() -> None:
    failed = with_(last_sync_start=NOW - HOUR / 2, last_success=NOW - 2 * HOUR)
    assert decide(failed, now=NOW).trigger is Trigger.RETRY


def test_timer_fires_when_the_interval_has_elapsed() -> None:
    assert decide(SYNCED, now=NOW).wake_at == NOW + 23 * HOUR
    assert decide(SYNCED, now=NOW + 23 * HOUR).trigger is Trigger.INTERVAL_ELAPSED


def test_backoff_doubles_up_to_the_cap() -> None:
    base, cap = datetime.timedelta(seconds=10), datetime.timedelta(minutes=5)
    assert [backoff(n, base=base, cap=cap).total_seconds() for n in range(6)] == [0, 10, 20, 40, 80, 160]
    assert backoff(100, base=base, cap=cap) == cap


@pytest.mark.parametrize(("text", "seconds"), [("24h", 86400), ("1h30m", 5400), ("90s", 90), ("1.5m", 90)])
def test_sync_interval_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "daily", "10", "1h 30m", "-5m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
