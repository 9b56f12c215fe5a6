"""Wiring of the delivery reconciler into the one runtime, in the mode its strategy is.

Workloads of the four kinds enqueue themselves; a shared claim's change enqueues its owner; the
mode's own informers wake what they wake (`strategy.DeliveryStrategy.attach`). A Model's or
ClusterModel's change enqueues the workloads that name it: `model_changed` is the handler for the
controller's Model informers, which the caller attaches. The orphan pass (`orphans`) takes back the
shared claims whose workload is gone. Everything runs on the Lease holder:
`attach` adds it to the leader's `Manager`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.controller.delivery.informers import BY_VOLUME, DeliveryInformers
from ai_models.controller.delivery.keys import WorkloadKey, workload_key
from ai_models.controller.delivery.observe import ModelOf
from ai_models.controller.delivery.orphans import OrphanedClaims
from ai_models.controller.delivery.reconciler import DeliveryReconciler, utcnow
from ai_models.controller.delivery.steps import DeliverySettings
from ai_models.controller.delivery.strategy import DeliveryStrategy
from ai_models.controller.runtime import Controller, Manager
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.models.reference import key_of

StrategyOf = Callable[[DeliveryInformers], DeliveryStrategy]


def claim_owners(claim: Mapping[str, Any]) -> list[WorkloadKey]:
    meta = claim.get("metadata") or {}
    return [
        WorkloadKey(WorkloadKind(str(ref["kind"])), str(meta.get("namespace") or ""), str(ref["name"]))
        for ref in meta.get("ownerReferences") or ()
        if isinstance(ref, Mapping) and ref.get("kind") in tuple(WorkloadKind) and ref.get("name")
    ]


class DeliveryRuntime:
    def __init__(
        self,
        *,
        api_client: Any,
        model_of: ModelOf,
        strategy: StrategyOf,
        settings: DeliverySettings | None = None,
        events: EventRecorder | None = None,
        workers: int = 2,
        resync_seconds: float | None = 300.0,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        """`strategy`: the mode, made for the informers every mode shares."""
        settings = settings or DeliverySettings()
        self.informers = DeliveryInformers(api_client, resync_seconds=resync_seconds)
        self.strategy = strategy(self.informers)
        self.reconciler = DeliveryReconciler(
            api_client=api_client,
            informers=self.informers,
            model_of=model_of,
            strategy=self.strategy,
            settings=settings,
            events=events,
            clock=clock,
        )
        self.controller: Controller[WorkloadKey] = Controller(
            "delivery", self.reconciler.reconcile, workers=workers
        )
        self.orphans = OrphanedClaims(
            objects=DeliveryObjects(api_client),
            claims=self.informers.claims,
            workloads=self.informers.workloads.values(),
            grace=settings.claim_grace,
            interval=settings.orphan_pass_interval,
            clock=clock,
        )

    def attach(self, manager: Manager) -> None:
        """Add the informers, the controller and the orphan pass to the leader's manager."""
        for informer in self.informers.workloads.values():
            manager.informer(informer)
            self.controller.watch(informer, lambda obj: [workload_key(obj)])
        manager.informer(self.informers.claims)
        self.controller.watch(self.informers.claims, claim_owners)
        self.strategy.attach(manager, self)
        manager.controller(self.controller)
        manager.loop("orphaned-claims", self.orphans.loop)

    def all_informers(self) -> list[Informer]:
        return [*self.informers.all(), *self.strategy.informers()]

    # ----- triggers (`strategy.Triggers`) ---------------------------------------------------------

    def model_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """For the Model and ClusterModel informers: the workloads naming the object look again
        when it appears, goes, or its status changes."""
        if old is not None and new is not None and old.get("status") == new.get("status"):
            return
        obj = new if new is not None else old
        if obj is None:
            return
        for key in self.informers.using(key_of(obj)):
            self.controller.enqueue(key)

    def enqueue(self, key: WorkloadKey) -> None:
        self.controller.enqueue(key)

    def enqueue_reporting(self, reason: str) -> None:
        for key in self.informers.reporting(reason):
            self.controller.enqueue(key)

    def enqueue_owners_of_claims_on(self, volume: str) -> None:
        for claim in self.informers.claims.by_index(BY_VOLUME, volume):
            for key in claim_owners(claim):
                self.controller.enqueue(key)

    def watch(self, informer: Informer, keys_of: Callable[[Mapping[str, Any]], list[WorkloadKey]]) -> None:
        self.controller.watch(informer, keys_of)
