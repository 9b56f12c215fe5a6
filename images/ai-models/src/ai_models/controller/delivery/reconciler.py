"""One reconcile of one workload: read -> observe -> decide -> run the steps -> requeue.

Level-triggered, idempotent, safe to repeat: the rules are the pure `domain.delivery.decision`,
the I/O of each part of its action one small module under `steps/`. The return value says when to
look again (None: on the next event).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.jobs import Jobs
from ai_models.adapters.kube.workloads import Conflict, Workloads
from ai_models.controller.delivery import steps
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.jobs import MATERIALIZER_CONTAINER
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.observe import ModelOf, Observer
from ai_models.controller.delivery.steps import DeliverySettings, StepContext
from ai_models.controller.models.slots import SlotKeeper, SlotWaiters, namespaced_job_name
from ai_models.controller.models.steps.upload_keys import UploadKeys
from ai_models.domain.delivery.claims import ClassChoice
from ai_models.domain.delivery.contract import ignored
from ai_models.domain.delivery.decision import ANNOTATIONS_REMOVED, DeliveryAction, Policy, decide
from ai_models.domain.delivery.placement import NodeCacheSeen
from ai_models.domain.storage.prerequisites import DeliveryMode
from ai_models.names import DELIVERY_SIGNING_KEY, DELIVERY_SIGNING_SECRET, MODULE_NAMESPACE

log = logging.getLogger(__name__)
# A workload changed between the read and the write: look again this soon (not a failure).
CONFLICT_RECHECK_SECONDS: Final = 0.5


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class DeliveryReconciler(SlotWaiters[WorkloadKey]):
    def __init__(
        self,
        *,
        api_client: Any,
        informers: DeliveryInformers,
        model_of: ModelOf,
        storage_class: Callable[[], ClassChoice],
        materializer_template: Callable[[], Mapping[str, Any]],
        settings: DeliverySettings,
        events: EventRecorder | None = None,
        module_namespace: str = MODULE_NAMESPACE,
        clock: Callable[[], datetime.datetime] = utcnow,
        slots: SlotKeeper | None = None,
        registry_credentials: Callable[[], bytes | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.informers = informers
        self.clock = clock
        self._api_client = api_client
        # Only the leader creates Jobs, so one keeper in this process sees every Job it creates
        # (none in NodeCache mode, which makes no Job).
        jobs = informers.jobs
        self.slots = slots or SlotKeeper(
            limit=settings.max_concurrent_materializations,
            job_cache=jobs.objects if jobs is not None else list,
            job_key=namespaced_job_name,
        )
        self.policy = Policy(
            provisioning_deadline=settings.provisioning_deadline,
            materialization_retry=settings.materialization_retry,
        )
        self.observer = Observer(
            api_client=api_client,
            informers=informers,
            model_of=model_of,
            storage_class=storage_class,
            slots=self.slots,
            termination_message=self._termination_message,
            node_cache=(
                NodeCacheSeen(
                    selector=settings.node_cache_selector, size_bytes=settings.node_cache_size_bytes
                )
                if settings.mode is DeliveryMode.NODE_CACHE
                else None
            ),
        )
        self.context = StepContext(
            workloads=Workloads(api_client),
            objects=DeliveryObjects(api_client),
            events=events,
            slots=self.slots,
            signing_keys=UploadKeys(
                api_client,
                namespace=module_namespace,
                secret=DELIVERY_SIGNING_SECRET,
                data_key=DELIVERY_SIGNING_KEY,
            ),
            materializer_template=materializer_template,
            registry_credentials=registry_credentials,
            settings=settings,
            clock=clock,
            notify=self,
        )

    def reconcile(self, key: WorkloadKey) -> float | None:
        obj = self.informers.workload(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.got_slot(key)  # gone or going: its claims and Jobs go with it (owner references)
            return None
        subject = self.observer.observe(key, obj)
        action = decide(subject.seen, policy=self.policy, now=self.clock())
        if (
            action is None
            and subject.owned_claims
            and subject.seen.request is None
            and not ignored(key.namespace)
        ):
            # Nothing of the module left on the workload but claims it owns: the annotations were
            # removed in an earlier pass (or by the webhook), and the claims still go (D100).
            action = DeliveryAction(ANNOTATIONS_REMOVED, None)
        if action is None:
            self.got_slot(key)
            return None
        log.debug("reconciling", extra={**subject.log, "rule": action.rule})
        try:
            return steps.run(action, ctx=self.context, subject=subject)
        except Conflict:
            return CONFLICT_RECHECK_SECONDS

    def _termination_message(self, job: Mapping[str, Any]) -> str | None:
        namespace = str(job["metadata"]["namespace"])
        return Jobs(self._api_client, namespace=namespace).termination_message(
            job, container=MATERIALIZER_CONTAINER
        )
