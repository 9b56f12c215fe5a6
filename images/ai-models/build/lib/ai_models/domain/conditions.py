"""Kubernetes-style conditions: set one, keeping `lastTransitionTime` unless the status changes."""

from __future__ import annotations

import datetime
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
