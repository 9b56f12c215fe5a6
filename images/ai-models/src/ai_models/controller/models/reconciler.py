"""One reconcile of one Model or ClusterModel: read -> observe -> decide -> run one step -> requeue.

Level-triggered, idempotent, safe to repeat: the rules are the pure `domain.models.decision`;
the I/O of each action is one small module under `steps/`. The return value says when to look
again (None: on the next event).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.accounting import Accounting
from ai_models.controller.jobs.signing_keys import SigningKeys
from ai_models.controller.jobs.slots import SlotKeeper, SlotWaiters
from ai_models.controller.models import steps
from ai_models.controller.models.dependencies import DependencyReader
from ai_models.controller.models.jobs import JobApi
from ai_models.controller.models.observe import Observer, owner_of
from ai_models.controller.models.planning import Planner
from ai_models.controller.models.steps.context import ReconcilerSettings, StepContext
from ai_models.domain.models.decision import (
    MAX_ATTEMPTS,
    PlanPublication,
    Policy,
    RePublishDamaged,
    decide,
    decide_after_plan,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.models.source import parse_source
from ai_models.names import UPLOAD_SIGNING_KEY, UPLOAD_SIGNING_SECRET

__all__ = ["MAX_ATTEMPTS", "Reconciler", "ReconcilerSettings", "owner_of"]

log = logging.getLogger(__name__)


class Reconciler(SlotWaiters[ModelKey]):
    def __init__(
        self,
        *,
        objects: ModelObjects,
        jobs: JobApi,
        job_cache: Callable[[], list[dict[str, Any]]],
        planner: Planner,
        store: ObjectStore,
        accounting: Accounting,
        api_client: Any,
        pod_template: Callable[[], Mapping[str, Any]],
        settings: ReconcilerSettings,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        slots: SlotKeeper | None = None,
    ) -> None:
        super().__init__()
        self.objects = objects
        self.planner = planner
        self.accounting = accounting
        self.settings = settings
        self.clock = clock
        # Only the leader creates Jobs, so one keeper in this process sees every Job it creates.
        self.slots = slots or SlotKeeper(limit=settings.max_concurrent_publications, job_cache=job_cache)
        self.policy = Policy(
            retry_seconds=settings.retry_failed_seconds,
            upload_token_ttl=settings.upload_token_ttl,
            upload_poll_seconds=settings.upload_poll_seconds,
        )
        self.observer = Observer(
            job_cache=job_cache,
            jobs=jobs,
            store=store,
            dependencies=DependencyReader(api_client),
            slots=self.slots,
        )
        self.context = StepContext(
            objects=objects,
            jobs=jobs,
            store=store,
            accounting=accounting,
            slots=self.slots,
            upload_keys=SigningKeys(
                api_client,
                namespace=settings.namespace,
                secret=UPLOAD_SIGNING_SECRET,
                data_key=UPLOAD_SIGNING_KEY,
            ),
            pod_template=pod_template,
            settings=settings,
            clock=clock,
            notify=self,
        )
        self.on_published: Callable[[str], None] = lambda result: None

    # ----- entry points -------------------------------------------------------------------------

    def reconcile(self, key: ModelKey) -> float | None:
        with self.accounting.lock.shared():
            obj = self.objects.get(key)
            if obj is None:
                self.got_slot(key)  # gone: it waits for nothing
                return None
            subject = self.observer.observe(key, obj)
            now = self.clock()
            action = decide(subject.seen, policy=self.policy, now=now)
            if isinstance(action, PlanPublication):
                source = parse_source(
                    subject.owner.kind, subject.owner.namespace, (obj.get("spec") or {}).get("source")
                )
                outcome = self.planner.plan(subject.owner, source)
                action = decide_after_plan(subject.seen, outcome, step=action, policy=self.policy, now=now)
            log.debug("reconciling", extra={**subject.log, "action": type(action).__name__})
            return steps.run(action, ctx=self.context, subject=subject)

    def mark_damaged(self, key: ModelKey, detail: str) -> None:
        """Called by the inventory pass: the Ready object's artifact is damaged; publish it again."""
        obj = self.objects.get(key)
        if obj is None:
            return
        subject = self.observer.observe(key, obj, damage=detail)
        action = decide(subject.seen, policy=self.policy, now=self.clock())
        if isinstance(action, RePublishDamaged):
            steps.run(action, ctx=self.context, subject=subject)

    # ----- what steps tell (steps.context.Notifier; slot waits are SlotWaiters') ---------------------

    def published(self, result: str) -> None:
        self.on_published(result)
