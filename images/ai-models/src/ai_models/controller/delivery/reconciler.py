"""One reconcile of one workload: read -> observe -> decide -> run the effects -> requeue.

Level-triggered, idempotent, safe to repeat: the rules are the pure `domain.delivery.verdict.decide`
with the mode's `ModeRules`, the I/O of each effect one handler (`steps/`, or the mode's own). The
return value says when to look again (None: on the next event).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any, Final

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.workloads import Conflict, Workloads
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.observe import ModelOf, Observer
from ai_models.controller.delivery.steps import DeliverySettings, StepContext, StepRunner
from ai_models.controller.delivery.strategy import DeliveryStrategy
from ai_models.domain.delivery.verdict import decide

log = logging.getLogger(__name__)
# A workload changed between the read and the write: look again this soon (not a failure).
CONFLICT_RECHECK_SECONDS: Final = 0.5


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class DeliveryReconciler:
    def __init__(
        self,
        *,
        api_client: Any,
        informers: DeliveryInformers,
        model_of: ModelOf,
        strategy: DeliveryStrategy,
        settings: DeliverySettings,
        events: EventRecorder | None = None,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self.informers = informers
        self.strategy = strategy
        self.clock = clock
        self.observer = Observer(informers=informers, model_of=model_of, strategy=strategy)
        self.context = StepContext(
            workloads=Workloads(api_client),
            objects=DeliveryObjects(api_client),
            events=events,
            settings=settings,
            clock=clock,
        )
        self.steps = StepRunner(self.context, mode_handlers=strategy.handlers())

    def reconcile(self, key: WorkloadKey) -> float | None:
        self.strategy.forget(key)
        obj = self.informers.workload(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # gone or going: its claims and Jobs go with it (owner references)
        subject = self.observer.observe(key, obj)
        verdict = decide(subject.seen, self.strategy.rules, now=self.clock())
        try:
            if verdict is None:
                self.steps.settle_label(subject)
                return None
        except Conflict:
            return CONFLICT_RECHECK_SECONDS
        log.debug("reconciling", extra={**subject.log, "rule": verdict.rule})
        try:
            return self.steps.run(verdict, subject=subject)
        except Conflict:
            return CONFLICT_RECHECK_SECONDS
