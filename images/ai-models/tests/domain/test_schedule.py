"""When a catalog source gets an indexing pass, and when the controller looks at it again."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from ai_models.domain.catalog.schedule import (
    Action,
    Decision,
    SourceObservation,
    SyncRequest,
    Trigger,
    decide,
    parse_duration,
    parse_sync_request,
    retry_not_before,
)
from ai_models.domain.conditions import parse_timestamp

NOW = datetime.datetime(2026, 11, 29, 20, 0, tzinfo=datetime.UTC)
HOUR = datetime.timedelta(hours=1)
MINUTE = datetime.timedelta(minutes=1)
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


# One row per rule: the observation (as changes to a synced source) and what the controller does.
RULES: dict[str, tuple[SourceObservation, Decision]] = {
    "nothing_happens_before_the_opt_in_annotation": (
        with_(opted_in=False, observed_generation=None, last_sync_start=None, last_success=None),
        Decision(Action.WAIT_FOR_OPT_IN),
    ),
    "a_source_that_lost_its_opt_in_waits_even_when_due": (
        with_(opted_in=False, last_success=NOW - 48 * HOUR),
        Decision(Action.WAIT_FOR_OPT_IN),
    ),
    "a_sync_request_does_nothing_before_the_opt_in": (
        with_(opted_in=False, sync_requested_at=NOW),
        Decision(Action.WAIT_FOR_OPT_IN),
    ),
    "an_invalid_request_is_not_reported_before_the_opt_in": (
        with_(opted_in=False, invalid_sync_request="tomorrow"),
        Decision(Action.WAIT_FOR_OPT_IN),
    ),
    "first_sync_starts_as_soon_as_the_source_opts_in": (
        with_(observed_generation=3, last_sync_start=None, last_success=None),
        Decision(Action.START, Trigger.FIRST_SYNC),
    ),
    "a_source_never_indexed_starts_its_first_sync_when_it_opts_in": (
        with_(generation=2, observed_generation=None, last_sync_start=None, last_success=None),
        Decision(Action.START, Trigger.FIRST_SYNC),
    ),
    "spec_change_starts_a_fresh_pass_even_during_backoff_or_a_checkpoint": (
        with_(generation=4, has_checkpoint=True, retry_not_before=NOW + HOUR, failed_passes=5),
        Decision(Action.START, Trigger.SPEC_CHANGED),
    ),
    "newer_request_annotation_starts_a_pass": (
        with_(sync_requested_at=NOW - MINUTE),
        Decision(Action.START, Trigger.SYNC_REQUESTED),
    ),
    "a_request_does_not_wait_for_the_backoff": (
        with_(sync_requested_at=NOW - MINUTE, retry_not_before=NOW + HOUR, failed_passes=3),
        Decision(Action.START, Trigger.SYNC_REQUESTED),
    ),
    "a_request_older_than_the_last_pass_is_already_served": (
        with_(sync_requested_at=NOW - 3 * HOUR),
        Decision(Action.SLEEP, wake_at=NOW + 23 * HOUR),
    ),
    "a_request_that_is_not_a_timestamp_is_reported_while_the_source_sleeps": (
        with_(invalid_sync_request="tomorrow"),
        Decision(Action.SLEEP, wake_at=NOW + 23 * HOUR, invalid_sync_request="tomorrow"),
    ),
    "a_request_that_is_not_a_timestamp_is_reported_during_the_backoff_too": (
        with_(invalid_sync_request="now", retry_not_before=NOW + MINUTE, failed_passes=1),
        Decision(Action.SLEEP, wake_at=NOW + MINUTE, invalid_sync_request="now"),
    ),
    "a_request_that_is_not_a_timestamp_does_not_hold_back_the_timer": (
        with_(invalid_sync_request="tomorrow", last_success=NOW - 25 * HOUR, last_sync_start=NOW - 26 * HOUR),
        Decision(Action.START, Trigger.INTERVAL_ELAPSED),
    ),
    "interrupted_pass_resumes_from_its_checkpoint_after_a_restart": (
        with_(has_checkpoint=True, last_sync_start=NOW - HOUR / 2),
        Decision(Action.RESUME, Trigger.INTERRUPTED),
    ),
    "a_checkpoint_waits_for_the_backoff_after_a_failure": (
        with_(has_checkpoint=True, retry_not_before=NOW + HOUR, failed_passes=2),
        Decision(Action.SLEEP, wake_at=NOW + HOUR),
    ),
    "a_failed_pass_waits_for_retry_not_before": (
        with_(last_sync_start=NOW - MINUTE, last_success=NOW - 2 * HOUR, retry_not_before=NOW + 30 * MINUTE),
        Decision(Action.SLEEP, wake_at=NOW + 30 * MINUTE),
    ),
    "a_failed_pass_is_retried_once_retry_not_before_has_passed": (
        with_(last_sync_start=NOW - HOUR / 2, last_success=NOW - 2 * HOUR, retry_not_before=NOW - MINUTE),
        Decision(Action.START, Trigger.RETRY),
    ),
    "a_failed_pass_without_checkpoint_is_retried_not_left_until_the_next_interval": (
        with_(last_sync_start=NOW - HOUR / 2, last_success=NOW - 2 * HOUR),
        Decision(Action.START, Trigger.RETRY),
    ),
    "a_failed_first_pass_is_retried_after_its_backoff": (
        with_(last_success=None, last_sync_start=NOW - MINUTE, retry_not_before=NOW),
        Decision(Action.START, Trigger.FIRST_SYNC),
    ),
    "a_rate_limited_pass_resumes_at_the_time_the_provider_named": (
        with_(has_checkpoint=True, retry_not_before=NOW - datetime.timedelta(seconds=1)),
        Decision(Action.RESUME, Trigger.INTERRUPTED),
    ),
    "timer_sleeps_until_the_interval_has_elapsed": (SYNCED, Decision(Action.SLEEP, wake_at=NOW + 23 * HOUR)),
    "timer_fires_when_the_interval_has_elapsed": (
        with_(last_success=NOW - 24 * HOUR, last_sync_start=NOW - 25 * HOUR),
        Decision(Action.START, Trigger.INTERVAL_ELAPSED),
    ),
    "a_source_without_the_finalizer_is_adopted_first": (
        with_(has_finalizer=False, generation=4),
        Decision(Action.ADOPT),
    ),
    "a_source_without_opt_in_is_adopted_too": (
        with_(has_finalizer=False, opted_in=False),
        Decision(Action.ADOPT),
    ),
    "kopf_leftover_annotations_are_removed_once": (with_(kopf_leftovers=True), Decision(Action.ADOPT)),
    "a_deleted_source_is_cleaned_up_even_mid_backoff": (
        with_(deleting=True, retry_not_before=NOW + HOUR, has_checkpoint=True),
        Decision(Action.CLEAN_UP),
    ),
    "a_deleted_source_without_opt_in_is_cleaned_up_too": (
        with_(deleting=True, opted_in=False, kopf_leftovers=True),
        Decision(Action.CLEAN_UP),
    ),
    "a_deleted_source_whose_finalizer_is_gone_needs_nothing": (
        with_(deleting=True, has_finalizer=False),
        Decision(Action.IDLE),
    ),
}


@pytest.mark.parametrize(("source", "expected"), RULES.values(), ids=RULES.keys())
def test_decision(source: SourceObservation, expected: Decision) -> None:
    assert decide(source, now=NOW) == expected


# When the controller looks again without a change: the requeue time the decision returns.
REQUEUES: dict[str, tuple[SourceObservation, float | None]] = {
    "a_sleeping_source_is_looked_at_when_its_interval_elapses": (SYNCED, 23 * 3600.0),
    "a_source_in_backoff_is_looked_at_when_the_backoff_ends": (
        with_(retry_not_before=NOW + datetime.timedelta(seconds=2), last_sync_start=NOW),
        2.0,
    ),
    "a_source_waiting_for_its_opt_in_is_looked_at_on_its_next_change_only": (with_(opted_in=False), None),
    "a_cleaned_up_source_is_not_looked_at_again": (with_(deleting=True, has_finalizer=False), None),
}


@pytest.mark.parametrize(("source", "seconds"), REQUEUES.values(), ids=REQUEUES.keys())
def test_requeue_after(source: SourceObservation, seconds: float | None) -> None:
    assert decide(source, now=NOW).requeue_after(NOW) == seconds


def test_a_wake_time_already_passed_is_looked_at_at_once() -> None:
    assert Decision(Action.SLEEP, wake_at=NOW - HOUR).requeue_after(NOW) == 0.0


def test_retry_time_follows_the_backoff_of_the_failed_passes() -> None:
    base, cap = datetime.timedelta(seconds=10), datetime.timedelta(minutes=5)
    at = retry_not_before(now=NOW, failed_passes=3, retry_after=None, base=base, cap=cap)
    assert at == NOW + datetime.timedelta(seconds=40)


def test_rate_limit_retry_after_wins_over_the_backoff() -> None:
    base, cap = datetime.timedelta(seconds=10), datetime.timedelta(minutes=5)
    at = retry_not_before(
        now=NOW, failed_passes=9, retry_after=datetime.timedelta(seconds=2), base=base, cap=cap
    )
    assert at == NOW + datetime.timedelta(seconds=2)


def test_retry_time_is_rounded_up_to_the_second_never_shortening_the_wait() -> None:
    now = NOW + datetime.timedelta(milliseconds=300)
    half = datetime.timedelta(seconds=0.5)
    at = retry_not_before(now=now, failed_passes=1, retry_after=None, base=half, cap=half)
    assert at == NOW + datetime.timedelta(seconds=1)
    assert at >= now + half


@pytest.mark.parametrize(
    ("value", "request_"),
    [
        (None, SyncRequest()),
        ("", SyncRequest()),
        ("2026-11-29T19:00:00Z", SyncRequest(at=NOW - HOUR)),
        ("2026-11-29T22:00:00+03:00", SyncRequest(at=NOW - HOUR)),
        ("2026-11-29T19:00:00.250Z", SyncRequest(at=NOW - HOUR + datetime.timedelta(milliseconds=250))),
        ("tomorrow", SyncRequest(invalid="tomorrow")),
        ("2026-11-29", SyncRequest(invalid="2026-11-29")),
        ("2026-11-29T19:00:00", SyncRequest(invalid="2026-11-29T19:00:00")),
        ("2026-13-29T19:00:00Z", SyncRequest(invalid="2026-13-29T19:00:00Z")),
        ("1764442800", SyncRequest(invalid="1764442800")),
    ],
    ids=[
        "absent_is_no_request",
        "empty_is_no_request",
        "utc_timestamp",
        "timestamp_with_offset_in_utc",
        "fractional_seconds",
        "a_word_is_not_a_timestamp",
        "a_date_alone_is_not_a_timestamp",
        "a_time_without_zone_is_not_a_timestamp",
        "month_13_is_not_a_timestamp",
        "epoch_seconds_are_not_a_timestamp",
    ],
)
def test_sync_request_annotation(value: str | None, request_: SyncRequest) -> None:
    assert parse_sync_request(value) == request_


def test_status_timestamps_are_read_as_utc() -> None:
    assert parse_timestamp("2026-11-29T20:00:00Z") == NOW
    assert parse_timestamp(None) is None
    assert parse_timestamp(17) is None


@pytest.mark.parametrize(("text", "seconds"), [("24h", 86400), ("1h30m", 5400), ("90s", 90), ("1.5m", 90)])
def test_sync_interval_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "daily", "10", "1h 30m", "-5m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
