"""What a catalog source's status says in each situation: every reason of the admin guide's table."""

from __future__ import annotations

import datetime

import pytest

from ai_models.adapters.hub.errors import ProviderErrorReason
from ai_models.domain.catalog.outcomes import (
    INDEXING,
    READY,
    ConditionValue,
    Failure,
    StatusChange,
    invalid_sync_request,
    pass_checkpointed,
    pass_failed,
    pass_started,
    pass_succeeded,
    waiting_for_opt_in,
)
from ai_models.domain.catalog.schedule import Trigger
from ai_models.names import CATALOG_SYNC_REQUESTED_AT_ANNOTATION, CatalogSourceReason
from ai_models.names import CatalogSourceEvent as Event

NOW = datetime.datetime(2026, 11, 29, 20, 0, tzinfo=datetime.UTC)
BASE, CAP = datetime.timedelta(seconds=10), datetime.timedelta(minutes=10)


def failed(
    reason: str, *, served: str | None = None, failed_passes: int = 0, **kwargs: object
) -> StatusChange:
    failure = Failure(reason=reason, message=f"the {reason} cause and its fix", **kwargs)  # type: ignore[arg-type]
    return pass_failed(failure, failed_passes=failed_passes, served=served, now=NOW, base=BASE, cap=CAP)


def reasons(change: StatusChange) -> dict[str, tuple[bool, str]]:
    return {str(type_): (value.status, value.reason) for type_, value in change.conditions.items()}


# The reason each situation sets, per condition: one row per rule of the admin guide's table.
SITUATIONS: dict[str, tuple[StatusChange, dict[str, tuple[bool, str]]]] = {
    "a_source_without_opt_in_and_no_index_is_not_ready_waiting_for_opt_in": (
        waiting_for_opt_in(served=False),
        {"Indexing": (False, "WaitingForOptIn"), "Ready": (False, "WaitingForOptIn")},
    ),
    "a_source_that_lost_its_opt_in_keeps_serving_its_index": (
        waiting_for_opt_in(served=True),
        {"Indexing": (False, "WaitingForOptIn")},
    ),
    "the_first_pass_is_indexing_and_not_indexed_yet": (
        pass_started(trigger=Trigger.FIRST_SYNC, generation=1, resumed_at=None, served=False, now=NOW),
        {"Indexing": (True, "Indexing"), "Ready": (False, "NotIndexedYet")},
    ),
    "a_later_pass_is_indexing_while_the_index_stays_ready": (
        pass_started(trigger=Trigger.INTERVAL_ELAPSED, generation=1, resumed_at=None, served=True, now=NOW),
        {"Indexing": (True, "Indexing")},
    ),
    "a_checkpoint_reports_its_progress_as_indexing": (
        pass_checkpointed(processed_models=40, generation="g2", resume={"generation": "g2"}),
        {"Indexing": (True, "Indexing")},
    ),
    "a_completed_pass_is_served_and_succeeded": (
        pass_succeeded(models=12, generation="g2", now=NOW),
        {"Ready": (True, "CatalogServed"), "Indexing": (False, "Succeeded")},
    ),
    "a_failure_with_an_index_served_keeps_it_ready": (
        failed("ProviderUnavailable", served="g1"),
        {"Indexing": (False, "ProviderUnavailable"), "Ready": (True, "CatalogServed")},
    ),
    "a_request_that_is_not_a_timestamp_is_reported_as_invalid_sync_request": (
        invalid_sync_request("tomorrow"),
        {"Indexing": (False, "InvalidSyncRequest")},
    ),
    **{
        f"a_failed_first_pass_is_not_ready_with_{reason}": (
            failed(reason),
            {"Indexing": (False, reason), "Ready": (False, reason)},
        )
        for reason in [
            CatalogSourceReason.TOKEN_SECRET_NOT_FOUND,
            CatalogSourceReason.OBJECT_STORE_UNAVAILABLE,
            CatalogSourceReason.INVALID_SPEC,
            *ProviderErrorReason,
        ]
    },
}


@pytest.mark.parametrize(("change", "expected"), SITUATIONS.values(), ids=SITUATIONS.keys())
def test_situation_sets_its_reasons(change: StatusChange, expected: dict[str, tuple[bool, str]]) -> None:
    assert reasons(change) == expected


def test_every_reason_of_a_source_is_set_in_some_situation() -> None:
    set_somewhere = {reason for change, _ in SITUATIONS.values() for _, reason in reasons(change).values()}
    assert set_somewhere == {*CatalogSourceReason, *ProviderErrorReason}


def test_a_failed_pass_counts_in_the_status_and_backs_off_from_there() -> None:
    change = failed("ProviderUnavailable", failed_passes=2)
    assert change.fields == {"failedPasses": 3, "retryNotBefore": "2026-11-29T20:00:40Z"}
    assert change.conditions[INDEXING].message.endswith("; retrying at 2026-11-29T20:00:40Z")
    assert change.event is not None
    assert (change.event.type_, change.event.reason) == ("Warning", Event.INDEXING_FAILED)


def test_a_rate_limited_pass_retries_at_the_time_the_provider_named() -> None:
    change = failed("ProviderRateLimited", failed_passes=6, retry_after=datetime.timedelta(seconds=2))
    assert change.fields["retryNotBefore"] == "2026-11-29T20:00:02Z"
    assert change.fields["failedPasses"] == 7


def test_a_rejected_cursor_drops_the_checkpoint() -> None:
    assert failed("ProviderRequestRejected", drop_checkpoint=True).fields["resume"] is None
    assert "resume" not in failed("ProviderUnavailable").fields


def test_success_resets_the_failure_count_and_the_retry_time() -> None:
    fields = pass_succeeded(models=12, generation="g2", now=NOW).fields
    assert (fields["failedPasses"], fields["retryNotBefore"], fields["resume"]) == (0, None, None)
    assert fields["lastSuccessfulSyncTime"] == "2026-11-29T20:00:00Z"


@pytest.mark.parametrize("trigger", [Trigger.SPEC_CHANGED, Trigger.SYNC_REQUESTED])
def test_a_pass_the_admin_asked_for_starts_a_fresh_backoff(trigger: Trigger) -> None:
    fields = pass_started(trigger=trigger, generation=2, resumed_at=None, served=True, now=NOW).fields
    assert (fields["failedPasses"], fields["retryNotBefore"]) == (0, None)


@pytest.mark.parametrize("trigger", [Trigger.RETRY, Trigger.INTERVAL_ELAPSED, Trigger.FIRST_SYNC])
def test_a_pass_the_schedule_started_keeps_counting_failures(trigger: Trigger) -> None:
    fields = pass_started(trigger=trigger, generation=2, resumed_at=None, served=True, now=NOW).fields
    assert "failedPasses" not in fields
    assert fields["resume"] is None


def test_a_resumed_pass_keeps_its_checkpoint_and_says_so() -> None:
    change = pass_started(trigger=Trigger.INTERRUPTED, generation=2, resumed_at=40, served=False, now=NOW)
    assert "resume" not in change.fields
    assert change.event is not None
    assert (change.event.reason, change.event.message) == (
        Event.INDEXING_RESUMED,
        "Indexing resuming at 40 models",
    )


def test_an_invalid_request_names_the_annotation_the_value_and_the_format() -> None:
    change = invalid_sync_request("tomorrow")
    message = change.conditions[INDEXING].message
    assert CATALOG_SYNC_REQUESTED_AT_ANNOTATION in message
    assert "'tomorrow'" in message
    assert "RFC 3339" in message
    assert change.event is not None
    assert (change.event.type_, change.event.reason) == ("Warning", Event.INVALID_SYNC_REQUEST)


def test_a_long_invalid_request_is_quoted_shortened() -> None:
    message = invalid_sync_request("x" * 5000).conditions[INDEXING].message
    assert len(message) < 400


def test_the_ready_message_of_a_served_source_names_the_failure() -> None:
    ready = failed("ProviderUnavailable", served="g1").conditions[READY]
    assert ready == ConditionValue(
        True, "CatalogServed", "serving generation g1; the last pass failed: ProviderUnavailable"
    )
