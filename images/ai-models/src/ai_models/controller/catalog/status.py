"""Reading a ModelCatalogSource's observed state and writing its status subresource."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.catalog.indexing import Checkpoint
from ai_models.domain.catalog.outcomes import StatusChange, pass_checkpointed
from ai_models.domain.catalog.schedule import (
    SourceObservation,
    parse_duration,
    parse_sync_request,
)
from ai_models.domain.conditions import parse_timestamp, set_condition
from ai_models.names import (
    CATALOG_FINALIZER,
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CATALOG_SYNC_REQUESTED_AT_ANNOTATION,
    KOPF_ANNOTATION_PREFIX,
    CatalogSourceStatus,
)

log = logging.getLogger(__name__)
DEFAULT_SYNC_INTERVAL = "24h"


def _int(value: object, default: int = 0) -> int:
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError):
        return default


def kopf_annotations(obj: Mapping[str, Any]) -> list[str]:
    """The bookkeeping annotations kopf left on a source created before issue 11."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return sorted(key for key in annotations if key.startswith(KOPF_ANNOTATION_PREFIX))


def observe(obj: Mapping[str, Any]) -> SourceObservation:
    """What the schedule needs to know, from the object alone (status included): a restarted
    controller or a new leader decides exactly as the previous one would have."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    request = parse_sync_request(annotations.get(CATALOG_SYNC_REQUESTED_AT_ANNOTATION))
    try:
        interval = parse_duration(str(spec.get("syncInterval") or DEFAULT_SYNC_INTERVAL))
    except ValueError:
        # The CRD's pattern refuses such a value; an object written past it gets the default.
        interval = parse_duration(DEFAULT_SYNC_INTERVAL)
    observed = status.get("observedGeneration")
    return SourceObservation(
        opted_in=annotations.get(CATALOG_SYNC_ANNOTATION) == CATALOG_SYNC_ENABLED,
        generation=_int(meta.get("generation")),
        observed_generation=None if observed is None else _int(observed),
        sync_interval=interval,
        sync_requested_at=request.at,
        last_sync_start=parse_timestamp(status.get("lastSyncStartTime")),
        last_success=parse_timestamp(status.get("lastSuccessfulSyncTime")),
        has_checkpoint=checkpoint_of(obj) is not None,
        retry_not_before=parse_timestamp(status.get(CatalogSourceStatus.RETRY_NOT_BEFORE)),
        failed_passes=max(_int(status.get(CatalogSourceStatus.FAILED_PASSES)), 0),
        invalid_sync_request=request.invalid,
        deleting=bool(meta.get("deletionTimestamp")),
        has_finalizer=CATALOG_FINALIZER in (meta.get("finalizers") or ()),
        kopf_leftovers=bool(kopf_annotations(obj)),
    )


def checkpoint_of(obj: Mapping[str, Any]) -> Checkpoint | None:
    resume = (obj.get("status") or {}).get("resume") or {}
    if not resume.get("generation"):
        return None
    return Checkpoint(
        generation=str(resume["generation"]),
        cursor=resume.get("cursor") or None,
        processed_models=_int(resume.get("processedModels")),
    )


def checkpoint_status(checkpoint: Checkpoint) -> dict[str, Any]:
    resume: dict[str, Any] = {
        "generation": checkpoint.generation,
        "processedModels": checkpoint.processed_models,
    }
    if checkpoint.cursor:
        resume["cursor"] = checkpoint.cursor
    return resume


Written = Callable[[dict[str, Any]], None]


@dataclasses.dataclass
class SourceStatusWriter:
    """Patches `status` of one source, starting from the object it was made from. Thread-safe (a
    pass may checkpoint from another thread); a change that changes nothing is not written."""

    api: Any
    obj: dict[str, Any]
    written: Written = lambda _obj: None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def status(self) -> Mapping[str, Any]:
        return self.obj.get("status") or {}

    def apply(self, change: StatusChange, *, now: datetime.datetime) -> bool:
        """Write `change` (conditions set for the object's generation, fields merged, None removes
        one); False when the status already says all of it."""
        with self._lock:
            generation = _int(self.obj["metadata"].get("generation"))
            current = self.status
            conditions = [dict(item) for item in current.get("conditions") or []]
            for type_, (state, reason, message) in change.conditions.items():
                conditions = set_condition(
                    conditions,
                    type_=type_,
                    status=state,
                    reason=reason,
                    message=message,
                    observed_generation=generation,
                    now=now,
                )
            fields = {str(key): value for key, value in change.fields.items()}
            unchanged = conditions == list(current.get("conditions") or []) and all(
                current.get(key) == value for key, value in fields.items()
            )
            if unchanged:
                return False
            body = {"status": {**fields, "conditions": conditions}}
            updated = CatalogSourceObjects(self.api).patch(self.name, body, status=True)
            self.obj = updated
        self.written(updated)
        return True

    def checkpoint(self, checkpoint: Checkpoint, *, now: datetime.datetime) -> None:
        self.apply(
            pass_checkpointed(
                processed_models=checkpoint.processed_models,
                generation=checkpoint.generation,
                resume=checkpoint_status(checkpoint),
            ),
            now=now,
        )
