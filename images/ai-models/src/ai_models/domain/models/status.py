"""The status a Model or ClusterModel shows in each situation, from one table.

Every phase sets all three condition types the same way wherever it is reached, so users (and
`kubectl wait --for=condition=Ready`) see one vocabulary:

| situation          | phase         | ArtifactResolved               | Ready             |
|--------------------|---------------|--------------------------------|-------------------|
| waiting for a slot | Pending       | False Pending                  | False Pending     |
| waiting for upload | WaitForUpload | False WaitingForUserUpload     | False Pending     |
| publishing         | Publishing    | False Publishing|ArtifactDamaged| False Publishing  |
| published          | Ready         | True ArtifactPublished         | True Ready        |
| failed             | Failed        | False <failure reason>         | False Failed      |
| deleting           | Deleting      | (kept)                         | False Pending     |

`MetadataResolved` is set only once the profile is known: True with ModelMetadataCalculated or
ModelMetadataPartial.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.domain.conditions import set_condition
from ai_models.names import ModelConditionType as Type
from ai_models.names import ModelPhase as Phase
from ai_models.names import ModelReason as Reason

FAILURE_REASONS = frozenset(
    {
        Reason.PUBLICATION_FAILED,
        Reason.INSUFFICIENT_STORAGE,
        Reason.STORAGE_USAGE_UNKNOWN,
        Reason.UNSUPPORTED_SOURCE,
        Reason.SOURCE_NOT_FOUND,
        Reason.CATALOG_ENTRY_NOT_FOUND,
    }
)
# A failure the user can only fix by creating a different object (spec.source is immutable).
FINAL_REASONS = frozenset({Reason.UNSUPPORTED_SOURCE})


@dataclasses.dataclass(frozen=True)
class Situation:
    phase: Phase
    artifact_reason: Reason
    message: str
    metadata_reason: Reason | None = None  # set with phase Ready
    metadata_message: str = ""


def pending(message: str) -> Situation:
    return Situation(Phase.PENDING, Reason.PENDING, message)


def waiting_for_upload(message: str) -> Situation:
    return Situation(Phase.WAIT_FOR_UPLOAD, Reason.WAITING_FOR_USER_UPLOAD, message)


def publishing(message: str, *, damaged: bool = False) -> Situation:
    return Situation(Phase.PUBLISHING, Reason.ARTIFACT_DAMAGED if damaged else Reason.PUBLISHING, message)


def ready(message: str, *, metadata_complete: bool, metadata_message: str) -> Situation:
    return Situation(
        Phase.READY,
        Reason.ARTIFACT_PUBLISHED,
        message,
        metadata_reason=Reason.MODEL_METADATA_CALCULATED
        if metadata_complete
        else Reason.MODEL_METADATA_PARTIAL,
        metadata_message=metadata_message,
    )


def failed(reason: Reason, message: str) -> Situation:
    if reason not in FAILURE_REASONS:
        raise ValueError(f"{reason} is not a failure reason")
    return Situation(Phase.FAILED, reason, message)


def deleting(message: str) -> Situation:
    return Situation(Phase.DELETING, Reason.PENDING, message)


_READY_REASON = {
    Phase.PENDING: Reason.PENDING,
    Phase.WAIT_FOR_UPLOAD: Reason.PENDING,
    Phase.PUBLISHING: Reason.PUBLISHING,
    Phase.READY: Reason.READY,
    Phase.FAILED: Reason.FAILED,
    Phase.DELETING: Reason.PENDING,
}


def status_patch(
    situation: Situation,
    *,
    conditions: Sequence[Mapping[str, Any]] | None,
    generation: int,
    now: datetime.datetime,
) -> dict[str, Any]:
    """`phase`, `observedGeneration` and the conditions for `situation`, to merge into status."""
    updated: list[dict[str, Any]] = [dict(item) for item in conditions or ()]
    ready_state = situation.phase is Phase.READY
    if situation.phase is not Phase.DELETING:
        updated = set_condition(
            updated,
            type_=Type.ARTIFACT_RESOLVED,
            status=ready_state,
            reason=situation.artifact_reason,
            message=situation.message,
            observed_generation=generation,
            now=now,
        )
    if situation.metadata_reason is not None:
        updated = set_condition(
            updated,
            type_=Type.METADATA_RESOLVED,
            status=True,
            reason=situation.metadata_reason,
            message=situation.metadata_message,
            observed_generation=generation,
            now=now,
        )
    updated = set_condition(
        updated,
        type_=Type.READY,
        status=ready_state,
        reason=_READY_REASON[situation.phase],
        message=situation.message,
        observed_generation=generation,
        now=now,
    )
    return {"phase": situation.phase.value, "observedGeneration": generation, "conditions": updated}


def shows(status: Mapping[str, Any] | None, situation: Situation) -> bool:
    """Whether `status` already says `situation` (so nothing needs writing)."""
    status = status or {}
    if status.get("phase") != situation.phase.value:
        return False
    for item in status.get("conditions") or ():
        if item.get("type") == Type.ARTIFACT_RESOLVED and situation.phase is not Phase.DELETING:
            return bool(
                item.get("reason") == situation.artifact_reason and item.get("message") == situation.message
            )
    return situation.phase is Phase.DELETING
