"""What each step of a catalog source writes: its conditions, status fields and Event, as data.

One function per situation, so the table of reasons (docs/ADMIN_GUIDE.md, "Conditions of a
source") is one place in code and is tested without an API server. A field set to None is removed
from the status (a JSON merge patch).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, NamedTuple

from ai_models.domain.catalog.schedule import ADMIN_TRIGGERS, Trigger, retry_not_before
from ai_models.domain.conditions import timestamp
from ai_models.names import (
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CATALOG_SYNC_REQUESTED_AT_ANNOTATION,
    CatalogConditionType,
    CatalogSourceStatus,
)
from ai_models.names import CatalogSourceEvent as Event
from ai_models.names import CatalogSourceReason as Reason

READY = CatalogConditionType.READY
INDEXING = CatalogConditionType.INDEXING
NORMAL, WARNING = "Normal", "Warning"
# How much of an annotation value a message quotes: enough to recognise it, never a wall of text.
QUOTED_VALUE_LIMIT = 64


class ConditionValue(NamedTuple):
    status: bool
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class EventNote:
    type_: str
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class StatusChange:
    conditions: Mapping[CatalogConditionType, ConditionValue]
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    event: EventNote | None = None


def waiting_for_opt_in(
    *, served: bool, value: str | None = None, invalid_request: str | None = None
) -> StatusChange:
    """`value`: the opt-in annotation as written, when it is there but is not the opt-in;
    `invalid_request`: a request annotation that is not a timestamp, said now rather than after
    the opt-in (a sleeping source says it with an Event, see `invalid_sync_request`)."""
    if value is None:
        message = f"add the annotation {CATALOG_SYNC_ANNOTATION}={CATALOG_SYNC_ENABLED} to start indexing"
    else:
        # The annotation is there (`enabled`, `true`, ...): "add it" would read as if it were not.
        message = f"{wrong_opt_in(value)} to start indexing"
    if invalid_request is not None:
        message += f"; {_bad_request_note(invalid_request)}"
    conditions = {INDEXING: ConditionValue(False, Reason.WAITING_FOR_OPT_IN, message)}
    if not served:
        conditions[READY] = ConditionValue(False, Reason.WAITING_FOR_OPT_IN, message)
    return StatusChange(conditions=conditions)


def wrong_opt_in(value: str) -> str:
    """The opt-in annotation is there with `value`, which is not the opt-in: what it must be."""
    return (
        f"the annotation {CATALOG_SYNC_ANNOTATION} is {_quoted(value)}; the value must be exactly "
        f"{CATALOG_SYNC_ENABLED} (case-sensitive)"
    )


def _quoted(value: str) -> str:
    return repr(value if len(value) <= QUOTED_VALUE_LIMIT else value[:QUOTED_VALUE_LIMIT] + "...")


def _bad_request_note(value: str) -> str:
    return (
        f"the annotation {CATALOG_SYNC_REQUESTED_AT_ANNOTATION}={_quoted(value)} is not an RFC 3339 "
        "timestamp, so no pass was requested; set it to the current time, e.g. "
        f"{CATALOG_SYNC_REQUESTED_AT_ANNOTATION}=$(date -u +%FT%TZ)"
    )


def invalid_sync_request(value: str) -> StatusChange:
    """The request annotation holds something that is not a timestamp: no pass was requested, and
    the admin learns why (the Indexing condition and a Warning Event), instead of waiting for one."""
    message = _bad_request_note(value)
    return StatusChange(
        conditions={INDEXING: ConditionValue(False, Reason.INVALID_SYNC_REQUEST, message)},
        event=EventNote(WARNING, Event.INVALID_SYNC_REQUEST, message),
    )


def pass_started(
    *,
    trigger: Trigger | None,
    generation: int,
    resumed_at: int | None,
    served: bool,
    now: datetime.datetime,
) -> StatusChange:
    """A pass begins (`resumed_at`: the models its checkpoint already holds, None for a fresh pass)."""
    what = f"resuming at {resumed_at} models" if resumed_at is not None else f"started ({trigger})"
    fields: dict[str, Any] = {"observedGeneration": generation, "lastSyncStartTime": timestamp(now)}
    if resumed_at is None:
        fields["resume"] = None  # a fresh pass never continues an older checkpoint
    if trigger in ADMIN_TRIGGERS:
        fields[CatalogSourceStatus.FAILED_PASSES] = 0
        fields[CatalogSourceStatus.RETRY_NOT_BEFORE] = None
    conditions = {INDEXING: ConditionValue(True, Reason.INDEXING, f"indexing {what}")}
    if not served:
        conditions[READY] = ConditionValue(
            False, Reason.NOT_INDEXED_YET, f"the first indexing pass is running ({what})"
        )
    reason = Event.INDEXING_RESUMED if resumed_at is not None else Event.INDEXING_STARTED
    return StatusChange(
        conditions=conditions, fields=fields, event=EventNote(NORMAL, reason, f"Indexing {what}")
    )


def pass_checkpointed(*, processed_models: int, generation: str, resume: Mapping[str, Any]) -> StatusChange:
    return StatusChange(
        conditions={
            INDEXING: ConditionValue(
                True, Reason.INDEXING, f"{processed_models} models indexed into generation {generation}"
            )
        },
        fields={"resume": dict(resume)},
    )


def pass_succeeded(*, models: int, generation: str, now: datetime.datetime) -> StatusChange:
    message = f"{models} models served from generation {generation}"
    return StatusChange(
        conditions={
            READY: ConditionValue(True, Reason.CATALOG_SERVED, message),
            INDEXING: ConditionValue(False, Reason.SUCCEEDED, f"the last pass indexed {models} models"),
        },
        fields={
            "resume": None,
            "servedGeneration": generation,
            "indexedModels": models,
            "lastSuccessfulSyncTime": timestamp(now),
            CatalogSourceStatus.FAILED_PASSES: 0,
            CatalogSourceStatus.RETRY_NOT_BEFORE: None,
        },
        event=EventNote(NORMAL, Event.INDEXING_SUCCEEDED, message),
    )


@dataclasses.dataclass(frozen=True)
class Failure:
    """A pass that failed: its reason, a message naming the cause and the fix (never a remote
    body), the provider's Retry-After if it named one, and whether the checkpoint is unusable."""

    reason: str
    message: str
    retry_after: datetime.timedelta | None = None
    drop_checkpoint: bool = False


def pass_failed(
    failure: Failure,
    *,
    failed_passes: int,
    served: str | None,
    now: datetime.datetime,
    base: datetime.timedelta,
    cap: datetime.timedelta,
) -> StatusChange:
    """The pass after `failed_passes` failures in a row failed too: count it and write when to retry,
    where a restarted controller or a new leader reads them back."""
    failures = failed_passes + 1
    retry_at = retry_not_before(
        now=now, failed_passes=failures, retry_after=failure.retry_after, base=base, cap=cap
    )
    message = f"{failure.message}; retrying at {timestamp(retry_at)}"
    conditions = {INDEXING: ConditionValue(False, failure.reason, message)}
    if served:
        conditions[READY] = ConditionValue(
            True,
            Reason.CATALOG_SERVED,
            f"serving generation {served}; the last pass failed: {failure.reason}",
        )
    else:
        conditions[READY] = ConditionValue(False, failure.reason, message)
    fields: dict[str, Any] = {
        CatalogSourceStatus.FAILED_PASSES: failures,
        CatalogSourceStatus.RETRY_NOT_BEFORE: timestamp(retry_at),
    }
    if failure.drop_checkpoint:
        fields["resume"] = None
    return StatusChange(
        conditions=conditions, fields=fields, event=EventNote(WARNING, Event.INDEXING_FAILED, message)
    )
