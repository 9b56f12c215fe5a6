"""What every delivery step works with: the reconciler's collaborators and settings."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.workloads import Workloads
from ai_models.controller.delivery.jobs import CLAIM_MOUNT, JobLimits
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.models.slots import SlotKeeper
from ai_models.controller.models.steps.upload_keys import UploadKeys
from ai_models.domain.delivery.token import DEFAULT_LIFETIME
from ai_models.domain.storage.prerequisites import DeliveryMode

DEFAULT_LIMITS = JobLimits(backoff_limit=3, deadline_seconds=6 * 3600)
REMEMBERED_SETTLED: Final = 8192  # settled Deployments remembered, least recently settled forgotten


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeliverySettings:
    """`api_url`: the serving API as materializers reach it; `ca_bundle`: a file in the
    materializer's pod that trusts its certificate; `mode`: delivery.mode, and in NodeCache mode
    `node_cache_size_bytes` (delivery.nodeCache.size, None: not set) and `node_cache_selector`
    (delivery.nodeCache.nodeSelector)."""

    api_url: str
    ca_bundle: str | None = None
    max_concurrent_materializations: int = 2
    provisioning_deadline: datetime.timedelta = datetime.timedelta(minutes=10)
    materialization_retry: datetime.timedelta = datetime.timedelta(minutes=5)
    limits: JobLimits = DEFAULT_LIMITS
    token_lifetime: datetime.timedelta = DEFAULT_LIFETIME
    claim_mount: str = CLAIM_MOUNT
    # A claim the workload no longer uses is marked, then deleted this long after (D100).
    claim_grace: datetime.timedelta = datetime.timedelta(hours=1)
    mode: DeliveryMode = DeliveryMode.SHARED_PVC
    node_cache_size_bytes: int | None = None
    node_cache_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)


class Notifier(Protocol):
    """What steps tell the reconciler: a workload waits for a materialization slot, or no more."""

    def waiting_for_slot(self, key: WorkloadKey) -> None: ...

    def got_slot(self, key: WorkloadKey) -> None: ...


class SettledDeployments:
    """The Deployments (uid and generation) whose stale ReplicaSets are all gone: not listed again
    until their template changes. Forgetting one costs one list, so the memory is bounded."""

    def __init__(self, *, limit: int = REMEMBERED_SETTLED) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._settled: OrderedDict[WorkloadKey, tuple[str, int]] = OrderedDict()

    def settled(self, key: WorkloadKey, *, uid: str, generation: int) -> bool:
        with self._lock:
            return self._settled.get(key) == (uid, generation)

    def mark(self, key: WorkloadKey, *, uid: str, generation: int) -> None:
        with self._lock:
            self._settled[key] = (uid, generation)
            self._settled.move_to_end(key)
            while len(self._settled) > self._limit:
                self._settled.popitem(last=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepContext:
    workloads: Workloads
    objects: DeliveryObjects
    events: EventRecorder | None
    slots: SlotKeeper
    signing_keys: UploadKeys
    materializer_template: Callable[[], Mapping[str, Any]]
    # The module's docker config JSON for the materializers' image pulls (None: pull without).
    registry_credentials: Callable[[], bytes | None]
    settings: DeliverySettings
    clock: Callable[[], datetime.datetime]
    notify: Notifier
    settled: SettledDeployments = dataclasses.field(default_factory=SettledDeployments)
