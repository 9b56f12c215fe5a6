"""Kubernetes-style conditions: set one, keeping `lastTransitionTime` unless the status changes."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from typing import Any

Condition = dict[str, Any]


def timestamp(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with second precision, as the API server writes timestamps."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: datetime.datetime,
) -> list[Condition]:
    """A new list with condition `type_` set; others are kept in their order."""
    wanted = "True" if status else "False"
    result: list[Condition] = []
    found = False
    for existing in conditions or ():
        if existing.get("type") != type_:
            result.append(dict(existing))
            continue
        found = True
        changed = existing.get("status") != wanted
        transition = timestamp(now) if changed else existing.get("lastTransitionTime", timestamp(now))
        result.append(
            _condition(
                type_, wanted, reason, message, observed_generation=observed_generation, transition=transition
            )
        )
    if not found:
        result.append(
            _condition(
                type_,
                wanted,
                reason,
                message,
                observed_generation=observed_generation,
                transition=timestamp(now),
            )
        )
    return result


def find_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    return next((item for item in conditions or () if item.get("type") == type_), None)


def _condition(
    type_: str, status: str, reason: str, message: str, *, observed_generation: int | None, transition: str
) -> Condition:
    condition: Condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    return condition


# RFC 3339 date-time: a date, `T`, a time with optional fraction, and `Z` or an offset.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_timestamp(value: object) -> datetime.datetime | None:
    """An RFC 3339 timestamp (as `date -u +%FT%TZ` writes it) in UTC; None for anything else."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    try:
        return datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00")).astimezone(datetime.UTC)
    except ValueError:
        return None  # the shape of a timestamp, not a real one (month 13)
