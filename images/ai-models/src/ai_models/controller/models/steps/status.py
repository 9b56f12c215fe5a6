"""Writing a situation (phase and conditions, from `domain.models.status`) and the durable failure
fields into an object's status; shared by the steps."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.ledger_store import LedgerStoreError
from ai_models.controller.models.steps.context import StepContext, Subject
from ai_models.domain.models import status as situations
from ai_models.domain.models.decision import Dependency
from ai_models.domain.models.source import spec_source_type
from ai_models.names import ModelStatus

log = logging.getLogger(__name__)


def show(
    ctx: StepContext,
    subject: Subject,
    situation: situations.Situation,
    *,
    extra: Mapping[str, Any] | None = None,
) -> None:
    obj = subject.obj
    status = obj.get("status") or {}
    patch = situations.status_patch(
        situation,
        conditions=status.get("conditions"),
        generation=int(obj["metadata"].get("generation") or 0),
        now=ctx.clock(),
    )
    patch.update(extra or {})
    source = status.get("source") or {}
    if "source" not in patch and not source.get("resolvedType") and (kind := spec_source_type(obj)):
        # The kind is known from the spec before anything is fetched: SOURCE shows it from the first
        # status on, a Model that fails before publishing included (Ready adds the revision).
        patch["source"] = {**source, "resolvedType": kind.value}
    write(ctx, subject, patch)


def write(ctx: StepContext, subject: Subject, patch: Mapping[str, Any]) -> None:
    """Merge-patch the status (None removes a field) and keep the local copy in step."""
    ctx.objects.patch_status(subject.key, patch)
    status = dict(subject.obj.get("status") or {})
    for name, value in patch.items():
        if value is None:
            status.pop(name, None)
        else:
            status[name] = value
    subject.obj["status"] = status


def failure_fields(*, attempts: int, at: datetime.datetime, dependency: Dependency | None) -> dict[str, Any]:
    """`failedAttempts`, `lastFailureTime` (millisecond precision: the retry timer runs from it)
    and what the failure depended on."""
    return {
        ModelStatus.FAILED_ATTEMPTS.value: attempts if attempts > 0 else None,
        ModelStatus.LAST_FAILURE_TIME.value: at.astimezone(datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        ModelStatus.LAST_FAILURE_DEPENDENCY.value: dependency.to_status() if dependency is not None else None,
    }


def no_failures() -> dict[str, Any]:
    return {name.value: None for name in ModelStatus}


def release_reservation(ctx: StepContext, subject: Subject) -> None:
    try:
        ctx.accounting.release_reservation(subject.owner)
    except LedgerStoreError as error:
        log.warning(
            "cannot release the reservation now; the inventory pass will",
            extra={**subject.log, "error": str(error)},
        )
