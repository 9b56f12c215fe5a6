"""What every step works with: the collaborators of the reconciler, and the object it acts on."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.accounting import Accounting
from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.jobs.signing_keys import SigningKeys
from ai_models.controller.jobs.slots import SlotKeeper
from ai_models.controller.models.jobs import JobApi
from ai_models.domain.artifacts.manifest import ArtifactManifest
from ai_models.domain.models.decision import ModelObservation
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.ledger import Owner


@dataclasses.dataclass(frozen=True)
class ReconcilerSettings:
    namespace: str
    store_url: str
    max_concurrent_publications: int
    limits: JobLimits
    retry_failed_seconds: float
    upload_token_ttl: datetime.timedelta
    upload_poll_seconds: float
    upload_in_cluster_url: str
    upload_public_url: str | None


class Notifier(Protocol):
    """What steps tell the reconciler: slots waited for and freed, publications ended."""

    def waiting_for_slot(self, key: ModelKey) -> None: ...

    def got_slot(self, key: ModelKey) -> None: ...

    def slot_freed(self) -> None: ...

    def published(self, result: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class StepContext:
    objects: ModelObjects
    jobs: JobApi
    store: ObjectStore
    accounting: Accounting
    slots: SlotKeeper
    upload_keys: SigningKeys
    pod_template: Callable[[], Mapping[str, Any]]
    settings: ReconcilerSettings
    clock: Callable[[], datetime.datetime]
    notify: Notifier


@dataclasses.dataclass
class Subject:
    """The object a step acts on, as observed; `obj["status"]` follows what steps write."""

    key: ModelKey
    obj: dict[str, Any]
    owner: Owner
    seen: ModelObservation
    manifest: ArtifactManifest | None = None  # of a Succeeded Job
    manifest_bytes: int = 0  # the stored manifest's own size

    @property
    def log(self) -> dict[str, str]:
        return {"object": str(self.key)}
