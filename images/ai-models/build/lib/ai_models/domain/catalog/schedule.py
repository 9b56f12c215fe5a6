"""When a catalog source needs an indexing pass: a pure decision from what the controller observes.

Triggers (ARCHITECTURE.md §4): the opt-in annotation, a spec change, a newer
`ai.deckhouse.io/catalog-sync-requested-at` timestamp, and the `syncInterval` timer. A pass
interrupted by a restart or a provider error resumes from its checkpoint; failures back off, but
a spec change or an explicit request never waits for the backoff, because the user may just
have fixed the cause.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re


class Action(enum.StrEnum):
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


@dataclasses.dataclass(frozen=True)
class Decision:
    action: Action
    trigger: Trigger | None = None
    wake_at: datetime.datetime | None = None


def decide(source: SourceObservation, *, now: datetime.datetime) -> Decision:
    if not source.opted_in:
        return Decision(Action.WAIT_FOR_OPT_IN)
    if source.observed_generation != source.generation:
        return Decision(Action.START, Trigger.SPEC_CHANGED)
    requested = source.sync_requested_at is not None and (
        source.last_sync_start is None or source.sync_requested_at > source.last_sync_start
    )
    if requested:
        return Decision(Action.START, Trigger.SYNC_REQUESTED)
    if source.retry_not_before is not None and now < source.retry_not_before:
        return Decision(Action.SLEEP, wake_at=source.retry_not_before)
    if source.has_checkpoint:
        return Decision(Action.RESUME, Trigger.INTERRUPTED)
    if source.last_success is None:
        return Decision(Action.START, Trigger.FIRST_SYNC)
    if source.last_sync_start is not None and source.last_sync_start > source.last_success:
        return Decision(Action.START, Trigger.RETRY)
    due = source.last_success + source.sync_interval
    if now >= due:
        return Decision(Action.START, Trigger.INTERVAL_ELAPSED)
    return Decision(Action.SLEEP, wake_at=due)


def backoff(failures: int, *, base: datetime.timedelta, cap: datetime.timedelta) -> datetime.timedelta:
    """Exponential backoff after `failures` consecutive failures (1 → base), never above `cap`."""
    if failures <= 0:
        return datetime.timedelta(0)
    delay: datetime.timedelta = base * (2 ** min(failures - 1, 30))
    return min(delay, cap)


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
    if position != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration such as 30m or 24h")
    return datetime.timedelta(seconds=seconds)
