"""What every delivery step works with, in any mode: the reconciler's collaborators and settings."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.workloads import Workloads
from ai_models.controller.delivery.keys import WorkloadKey

REMEMBERED_SETTLED: Final = 8192  # settled Deployments remembered, least recently settled forgotten


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeliverySettings:
    """What delivery in every mode is configured with: a claim the workload no longer uses is
    marked, then deleted `claim_grace` after (D100); claims whose owner is gone are looked at every
    `orphan_pass_interval` (D152)."""

    claim_grace: datetime.timedelta = datetime.timedelta(hours=1)
    orphan_pass_interval: datetime.timedelta = datetime.timedelta(minutes=15)


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
    settings: DeliverySettings
    clock: Callable[[], datetime.datetime]
    settled: SettledDeployments = dataclasses.field(default_factory=SettledDeployments)
