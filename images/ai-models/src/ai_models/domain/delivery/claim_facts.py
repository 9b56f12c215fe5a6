"""What SharedPVC delivery reads of a workload besides its models: the class a new claim would
get, the claim named for the current model set (`wanted_claim`) with its PersistentVolume, the
ProvisioningFailed message about that very claim (`provisioning_failure`), the materialization Job
of that claim and the cluster's materialization slots."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ai_models.domain.conditions import parse_timestamp
from ai_models.domain.delivery.claims import ClassChoice, SharedClaim, claim_name
from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.report import provisioner_text
from ai_models.domain.delivery.workload_models import ModelSeen, resolved_models
from ai_models.domain.jobs import JobState
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import ClaimPhase
from ai_models.names import MATERIALIZED_DIGESTS_ANNOTATION

PROVISIONING_FAILED_EVENT: Final = "ProvisioningFailed"
CLAIM_KIND: Final = "PersistentVolumeClaim"


@dataclasses.dataclass(frozen=True)
class ClaimSeen:
    """The claim named for the workload's current model set."""

    name: str
    uid: str
    phase: ClaimPhase
    created: datetime.datetime
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    owner_uids: frozenset[str] = frozenset()
    storage_class: str | None = None
    volume_name: str = ""
    volume_exists: bool = True  # the PersistentVolume `volume_name` exists
    deleting: bool = False
    materialized: frozenset[str] = frozenset()  # digests whose materialization succeeded on it

    @property
    def shared(self) -> SharedClaim:
        return SharedClaim("", self.name, self.labels, self.owner_uids, self.deleting)

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, volume_exists: bool) -> ClaimSeen:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        shared = SharedClaim.of(obj)
        recorded = str((meta.get("annotations") or {}).get(MATERIALIZED_DIGESTS_ANNOTATION) or "")
        phase_text = str((obj.get("status") or {}).get("phase") or "")
        return cls(
            name=shared.name,
            uid=str(meta.get("uid") or ""),
            phase=ClaimPhase(phase_text) if phase_text in tuple(ClaimPhase) else ClaimPhase.PENDING,
            created=parse_timestamp(meta.get("creationTimestamp"))
            or datetime.datetime.min.replace(tzinfo=datetime.UTC),
            labels=shared.labels,
            owner_uids=shared.owner_uids,
            storage_class=spec.get("storageClassName") or None,
            volume_name=str(spec.get("volumeName") or ""),
            volume_exists=volume_exists,
            deleting=shared.deleting,
            materialized=frozenset(item for item in recorded.split(",") if item),
        )


@dataclasses.dataclass(frozen=True)
class JobRef:
    namespace: str
    name: str
    uid: str


@dataclasses.dataclass(frozen=True)
class MaterializationSeen:
    """The materialization Job of the claim: `message` is the materializer's own termination
    message of a failed Job (never a remote body), `finished` when it ended; `job` the Job that
    `RemoveJob` removes (None: none to remove)."""

    state: JobState = JobState.NONE
    message: str = ""
    finished: datetime.datetime | None = None
    job: JobRef | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClaimFacts:
    """The SharedPVC part of an observation (`verdict.DeliveryObservation.facts`)."""

    storage: ClassChoice = dataclasses.field(default_factory=lambda: ClassChoice(None))
    claim: ClaimSeen | None = None
    provisioning_failure: str | None = None  # from `provisioning_failure`: about this claim's uid only
    materialization: MaterializationSeen = MaterializationSeen()
    materializations_running: int = 0
    materializations_limit: int = 2


def wanted_claim(request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]) -> str | None:
    """The claim name for the request's current artifacts (None while a model is not deliverable,
    or the workload has no name yet)."""
    resolved = resolved_models(request, models)
    if resolved is None or not request.workload.name:
        return None
    return claim_name(request.workload, (item.digest for item in resolved))


def provisioning_failure(events: Iterable[Mapping[str, Any]], *, claim_uid: str) -> str | None:
    """The latest ProvisioningFailed message about the claim with this uid, as the report shows it.

    Events are read by a field selector on the claim's name, which anyone who may create Events in
    the namespace can also write: an Event is believed only when its `involvedObject` is this
    claim's uid (a claim made earlier under the same name, or a forged Event, has another)."""
    latest: tuple[datetime.datetime, str] | None = None
    for event in events:
        involved = event.get("involvedObject") or {}
        if (
            not claim_uid
            or event.get("reason") != PROVISIONING_FAILED_EVENT
            or event.get("type") != "Warning"
            or involved.get("kind") != CLAIM_KIND
            or involved.get("uid") != claim_uid
        ):
            continue
        when = _event_time(event)
        if latest is None or when >= latest[0]:
            latest = (when, str(event.get("message") or ""))
    return provisioner_text(latest[1]) or None if latest is not None else None


def _event_time(event: Mapping[str, Any]) -> datetime.datetime:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        when = parse_timestamp(value)
        if when is not None:
            return when
    return datetime.datetime.min.replace(tzinfo=datetime.UTC)
