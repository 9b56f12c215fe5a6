"""What a catalog source needs next: a pure decision from what the controller observes.

Triggers (docs/internal/ARCHITECTURE.md §4): the opt-in annotation, a spec change, a newer
`ai.deckhouse.io/catalog-sync-requested-at` timestamp, and the `syncInterval` timer. A pass
interrupted by a restart or a provider error resumes from its checkpoint; failures back off
(`status.failedPasses`, `status.retryNotBefore`: kept in the object, so a new leader keeps the
backoff), but a spec change or an explicit request never waits for the backoff, because the user
may just have fixed the cause.

The decision also says when to look again (`requeue_after`): the timer or the end of the backoff
for a sleeping source, never for one waiting for its opt-in, since any change of the object
brings it back to the controller.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import re

from ai_models.domain.backoff import Backoff
from ai_models.domain.conditions import parse_timestamp


class Action(enum.StrEnum):
    ADOPT = "Adopt"  # add the finalizer and drop kopf's leftover annotations (one metadata patch)
    CLEAN_UP = "CleanUp"  # deleted: remove the source's index, then the finalizer
    IDLE = "Idle"  # deleted and cleaned up: nothing left to do
    WAIT_FOR_OPT_IN = "WaitForOptIn"
    START = "Start"
    RESUME = "Resume"
    SLEEP = "Sleep"


class Trigger(enum.StrEnum):
    SPEC_CHANGED = "SpecChanged"
    SYNC_REQUESTED = "SyncRequested"
    FIRST_SYNC = "FirstSync"
    INTERVAL_ELAPSED = "SyncIntervalElapsed"
    RETRY = "RetryAfterFailure"
    INTERRUPTED = "PassInterrupted"


# A pass started by the admin's own act (a new spec, an explicit request) begins a fresh backoff.
ADMIN_TRIGGERS = frozenset({Trigger.SPEC_CHANGED, Trigger.SYNC_REQUESTED})


@dataclasses.dataclass(frozen=True)
class SyncRequest:
    """The request annotation: a timestamp, or the text that is not one (reported, not ignored)."""

    at: datetime.datetime | None = None
    invalid: str | None = None


@dataclasses.dataclass(frozen=True)
class SourceObservation:
    opted_in: bool
    generation: int
    observed_generation: int | None
    sync_interval: datetime.timedelta
    sync_requested_at: datetime.datetime | None
    last_sync_start: datetime.datetime | None
    last_success: datetime.datetime | None
    has_checkpoint: bool
    retry_not_before: datetime.datetime | None = None
    failed_passes: int = 0
    invalid_sync_request: str | None = None
    deleting: bool = False
    has_finalizer: bool = True
    kopf_leftovers: bool = False


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    trigger: Trigger | None = None
    wake_at: datetime.datetime | None = None
    # A request annotation that is not a timestamp, to report while the source sleeps.
    invalid_sync_request: str | None = None

    def requeue_after(self, now: datetime.datetime) -> float | None:
        """Seconds until the source must be looked at again without any change; None: on the next
        change only. The steps of the other actions say for themselves (they change the object)."""
        if self.action is Action.SLEEP and self.wake_at is not None:
            return max((self.wake_at - now).total_seconds(), 0.0)
        return None


def decide(source: SourceObservation, *, now: datetime.datetime) -> Decision:
    if source.deleting:
        return Decision(Action.CLEAN_UP) if source.has_finalizer else Decision(Action.IDLE)
    if not source.has_finalizer or source.kopf_leftovers:
        return Decision(Action.ADOPT)
    if not source.opted_in:
        return Decision(Action.WAIT_FOR_OPT_IN)
    if source.observed_generation is None:
        return Decision(Action.START, Trigger.FIRST_SYNC)  # never indexed: the opt-in is what is new
    if source.observed_generation != source.generation:
        return Decision(Action.START, Trigger.SPEC_CHANGED)
    requested = source.sync_requested_at is not None and (
        source.last_sync_start is None or source.sync_requested_at > source.last_sync_start
    )
    if requested:
        return Decision(Action.START, Trigger.SYNC_REQUESTED)
    invalid = source.invalid_sync_request
    if source.retry_not_before is not None and now < source.retry_not_before:
        return Decision(Action.SLEEP, wake_at=source.retry_not_before, invalid_sync_request=invalid)
    if source.has_checkpoint:
        return Decision(Action.RESUME, Trigger.INTERRUPTED)
    if source.last_success is None:
        return Decision(Action.START, Trigger.FIRST_SYNC)
    if source.last_sync_start is not None and source.last_sync_start > source.last_success:
        return Decision(Action.START, Trigger.RETRY)
    due = source.last_success + source.sync_interval
    if now >= due:
        return Decision(Action.START, Trigger.INTERVAL_ELAPSED)
    return Decision(Action.SLEEP, wake_at=due, invalid_sync_request=invalid)


def retry_not_before(
    *,
    now: datetime.datetime,
    failed_passes: int,
    retry_after: datetime.timedelta | None,
    base: datetime.timedelta,
    cap: datetime.timedelta,
) -> datetime.datetime:
    """When a source that failed `failed_passes` times in a row may be tried again: the provider's
    Retry-After when it named one, else the backoff. Rounded up to the whole second, the precision
    of a status timestamp, so the written time never shortens the wait."""
    delay = retry_after if retry_after is not None else Backoff.between(base, cap).after(failed_passes)
    moment = now + delay
    whole = moment.replace(microsecond=0)
    return whole if whole == moment else whole + datetime.timedelta(seconds=1)


def parse_sync_request(value: object) -> SyncRequest:
    """The request annotation's value: absent or empty is no request; an RFC 3339 timestamp is one;
    anything else is kept as text for the report."""
    if value is None or value == "":
        return SyncRequest()
    at = parse_timestamp(value)
    return SyncRequest(at=at) if at is not None else SyncRequest(invalid=str(value))


_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> datetime.timedelta:
    """A Go duration (`24h`, `1h30m`), the format of `spec.syncInterval`."""
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text) or not text or not math.isfinite(seconds):
        raise ValueError(f"{text!r} is not a duration such as 30m or 24h")
    return datetime.timedelta(seconds=seconds)
