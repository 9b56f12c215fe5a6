"""Wiring of the delivery reconciler into the one runtime (not yet in `controller.main`).

Workloads of the four kinds enqueue themselves; a shared claim's change enqueues its owner, a
PersistentVolume's the owners of the claims bound to it, a materialize Job's its workload, and a Job
that stops running wakes the workloads that wait for a slot (SharedPVC mode). In NodeCache mode a
selected Node that appears, goes or changes its cache report wakes the workloads reported
`InsufficientNodeCacheCapacity` (a Delivered one is judged again at the resync). A Model's or
ClusterModel's change enqueues the workloads that name it: `model_changed` is the handler for the
controller's Model informers, which the caller attaches. Everything runs on the Lease holder:
`attach` adds it to the leader's `Manager`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.events import EventRecorder
from ai_models.controller.delivery.informers import BY_VOLUME, DeliveryInformers
from ai_models.controller.delivery.jobs import workload_of_job
from ai_models.controller.delivery.keys import WorkloadKey, workload_key
from ai_models.controller.delivery.observe import ModelOf
from ai_models.controller.delivery.reconciler import DeliveryReconciler, utcnow
from ai_models.controller.delivery.steps import DeliverySettings
from ai_models.controller.models.jobs import is_running
from ai_models.controller.runtime import Controller, Manager
from ai_models.domain.delivery.claims import ClassChoice
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.models.reference import key_of
from ai_models.names import MODULE_NAMESPACE, DeliveryReason


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
        storage_class: Callable[[], ClassChoice],
        materializer_template: Callable[[], Mapping[str, Any]],
        settings: DeliverySettings,
        events: EventRecorder | None = None,
        module_namespace: str = MODULE_NAMESPACE,
        workers: int = 2,
        resync_seconds: float | None = 300.0,
        clock: Callable[[], datetime.datetime] = utcnow,
        registry_credentials: Callable[[], bytes | None] = lambda: None,
    ) -> None:
        self.informers = DeliveryInformers(
            api_client,
            resync_seconds=resync_seconds,
            mode=settings.mode,
            node_selector=settings.node_cache_selector,
        )
        self.reconciler = DeliveryReconciler(
            api_client=api_client,
            informers=self.informers,
            model_of=model_of,
            storage_class=storage_class,
            materializer_template=materializer_template,
            settings=settings,
            events=events,
            module_namespace=module_namespace,
            clock=clock,
            registry_credentials=registry_credentials,
        )
        self.controller: Controller[WorkloadKey] = Controller(
            "delivery", self.reconciler.reconcile, workers=workers
        )
        self.reconciler.on_slot_freed = self._wake

    def attach(self, manager: Manager) -> None:
        """Add the informers and the controller to the leader's manager."""
        for informer in self.informers.workloads.values():
            manager.informer(informer)
            self.controller.watch(informer, lambda obj: [workload_key(obj)])
        manager.informer(self.informers.claims)
        self.controller.watch(self.informers.claims, claim_owners)
        if self.informers.volumes is not None:
            manager.informer(self.informers.volumes)
            self.informers.volumes.add_handler(self._volume_changed)
        if self.informers.jobs is not None:
            manager.informer(self.informers.jobs)
            self.controller.watch(self.informers.jobs, self._workload_of_job)
            self.informers.jobs.add_handler(self._job_changed)
        if self.informers.nodes is not None:
            manager.informer(self.informers.nodes)
            self.informers.nodes.add_handler(self.node_changed)
        manager.controller(self.controller)

    # ----- triggers -----------------------------------------------------------------------------

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

    def node_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """A selected Node came, went, or its labels or cache report changed (the informer keeps
        nothing else of it, so a status heartbeat compares equal and wakes nobody)."""
        if old is not None and new is not None and old == new:
            return
        for key in self.informers.reporting(DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY.value):
            self.controller.enqueue(key)

    @staticmethod
    def _workload_of_job(job: Mapping[str, Any]) -> list[WorkloadKey]:
        key = workload_of_job(job)
        return [key] if key is not None else []

    def _volume_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        obj = new if new is not None else old
        name = str(((obj or {}).get("metadata") or {}).get("name") or "")
        if not name:
            return
        for claim in self.informers.claims.by_index(BY_VOLUME, name):
            for key in claim_owners(claim):
                self.controller.enqueue(key)

    def _job_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if old is not None and is_running(old) and (new is None or not is_running(new)):
            self.reconciler.slot_freed()

    def _wake(self, keys: set[WorkloadKey]) -> None:
        for key in keys:
            self.controller.enqueue(key)
