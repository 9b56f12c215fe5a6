"""Reading a ModelCatalogSource's observed state and writing its status subresource."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from ai_models.catalog.indexing import Checkpoint
from ai_models.domain.catalog.schedule import SourceObservation, parse_duration
from ai_models.domain.conditions import set_condition
from ai_models.names import (
    API_GROUP,
    API_VERSION,
    CATALOG_SYNC_ANNOTATION,
    CATALOG_SYNC_ENABLED,
    CATALOG_SYNC_REQUESTED_AT_ANNOTATION,
    CatalogConditionType,
    Plural,
)
from ai_models.names import CatalogSourceReason as Reason

log = logging.getLogger(__name__)
DEFAULT_SYNC_INTERVAL = "24h"


def parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def observe(body: Mapping[str, Any], *, retry_not_before: datetime.datetime | None) -> SourceObservation:
    """What the schedule needs to know, from the live object."""
    meta = body.get("metadata", {})
    annotations = meta.get("annotations") or {}
    status = body.get("status") or {}
    spec = body.get("spec") or {}
    return SourceObservation(
        opted_in=annotations.get(CATALOG_SYNC_ANNOTATION) == CATALOG_SYNC_ENABLED,
        generation=int(meta.get("generation") or 0),
        observed_generation=status.get("observedGeneration"),
        sync_interval=parse_duration(spec.get("syncInterval") or DEFAULT_SYNC_INTERVAL),
        sync_requested_at=parse_time(annotations.get(CATALOG_SYNC_REQUESTED_AT_ANNOTATION)),
        last_sync_start=parse_time(status.get("lastSyncStartTime")),
        last_success=parse_time(status.get("lastSuccessfulSyncTime")),
        has_checkpoint=bool(status.get("resume")),
        retry_not_before=retry_not_before,
    )


def checkpoint_of(body: Mapping[str, Any]) -> Checkpoint | None:
    resume = (body.get("status") or {}).get("resume") or {}
    if not resume.get("generation"):
        return None
    return Checkpoint(
        generation=str(resume["generation"]),
        cursor=resume.get("cursor") or None,
        processed_models=int(resume.get("processedModels") or 0),
    )


def checkpoint_status(checkpoint: Checkpoint) -> dict[str, Any]:
    resume: dict[str, Any] = {
        "generation": checkpoint.generation,
        "processedModels": checkpoint.processed_models,
    }
    if checkpoint.cursor:
        resume["cursor"] = checkpoint.cursor
    return resume


@dataclasses.dataclass
class SourceStatusWriter:
    """Patches `status` of one source. Thread-safe: the indexing thread writes checkpoints."""

    api: Any
    name: str
    generation: int
    conditions: list[dict[str, Any]]
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @classmethod
    def for_body(cls, api: Any, body: Mapping[str, Any]) -> SourceStatusWriter:
        status = body.get("status") or {}
        return cls(
            api=api,
            name=body["metadata"]["name"],
            generation=int(body["metadata"].get("generation") or 0),
            conditions=[dict(item) for item in status.get("conditions") or []],
        )

    def update(
        self,
        *,
        now: datetime.datetime,
        fields: Mapping[str, Any] | None = None,
        conditions: Mapping[CatalogConditionType, tuple[bool, str, str]] | None = None,
    ) -> None:
        """Merge `fields` into status and set `conditions` ({type: (status, reason, message)})."""
        with self._lock:
            for type_, (state, reason, message) in (conditions or {}).items():
                self.conditions = set_condition(
                    self.conditions,
                    type_=type_,
                    status=state,
                    reason=reason,
                    message=message,
                    observed_generation=self.generation,
                    now=now,
                )
            status: dict[str, Any] = {**(fields or {}), "conditions": self.conditions}
            k8s.CustomObjectsApi(self.api).patch_cluster_custom_object_status(
                API_GROUP, API_VERSION, Plural.MODEL_CATALOG_SOURCES, self.name, {"status": status}
            )

    def checkpoint(self, checkpoint: Checkpoint, *, now: datetime.datetime) -> None:
        self.update(
            now=now,
            fields={"resume": checkpoint_status(checkpoint)},
            conditions={
                CatalogConditionType.INDEXING: (
                    True,
                    Reason.INDEXING,
                    f"{checkpoint.processed_models} models indexed into generation {checkpoint.generation}",
                )
            },
        )
