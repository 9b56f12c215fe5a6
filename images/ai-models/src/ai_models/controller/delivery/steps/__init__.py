"""Run a verdict's effects: a loop over them in the order the verdict gives
(`domain.delivery.effects`), one handler per effect type, the mode's own handlers
(`strategy.DeliveryStrategy.handlers`) beside those every mode shares. A handler may end the pass
(a refused object, whose report says why already); the earliest look again any step asks for wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.controller.delivery.steps.context import DeliverySettings, StepContext
from ai_models.controller.delivery.steps.pods import selected_pods, ungate_pods
from ai_models.controller.delivery.steps.replica_sets import delete_stale_replica_sets
from ai_models.controller.delivery.steps.report import write_report
from ai_models.controller.delivery.steps.superseded import release_claims
from ai_models.controller.delivery.steps.template import mark_workload, write_template
from ai_models.controller.delivery.strategy import DONE, Handler, Step, Subject
from ai_models.domain.delivery.effects import (
    DeleteStaleReplicaSets,
    ReleaseClaims,
    UngatePods,
    WriteReport,
    WriteTemplate,
)
from ai_models.domain.delivery.marking import label_change, marked
from ai_models.domain.delivery.verdict import Verdict

__all__ = ["DeliverySettings", "StepContext", "StepRunner"]


class _Pass:
    """The effects of one verdict on one workload: the Pods are listed at most once per pass."""

    def __init__(self, ctx: StepContext, subject: Subject) -> None:
        self.ctx = ctx
        self.subject = subject
        self._pods: list[dict[str, Any]] | None = None

    def pods(self) -> list[dict[str, Any]]:
        if self._pods is None:
            self._pods = selected_pods(workloads=self.ctx.workloads, subject=self.subject)
        return self._pods


class StepRunner:
    def __init__(self, ctx: StepContext, *, mode_handlers: Mapping[type[Any], Handler]) -> None:
        self.ctx = ctx
        shared: dict[type[Any], Any] = {
            WriteTemplate: _write_template,
            UngatePods: _ungate_pods,
            WriteReport: _write_report,
            DeleteStaleReplicaSets: _delete_stale_replica_sets,
            ReleaseClaims: _release_claims,
        }
        self._shared = shared
        self._mode = dict(mode_handlers)

    def run(self, verdict: Verdict, *, subject: Subject) -> float | None:
        """Do the verdict's effects in order; when to look at the workload again."""
        again = verdict.requeue
        current = _Pass(self.ctx, subject)
        # The label goes on before the template gets the module's part and comes off after the
        # template loses it, so a workload that carries the part always carries the label (D158).
        final = verdict.template if verdict.template is not None else subject.seen.template
        change = label_change(subject.obj["metadata"].get("labels"), final)
        if change is True:
            mark_workload(True, ctx=self.ctx, subject=subject)
        for effect in verdict.effects:
            kind = type(effect)
            if kind in self._shared:
                step: Step = self._shared[kind](effect, current)
            else:
                step = self._mode[kind](effect, self.ctx, subject)
            if step.again is not None:
                again = step.again if again is None or step.stop else min(again, step.again)
            if step.stop:
                return again
        if change is False:
            mark_workload(False, ctx=self.ctx, subject=subject)
        return again

    def settle_label(self, subject: Subject) -> None:
        """A workload the verdict leaves alone: only a label its template no longer warrants goes."""
        if label_change(subject.obj["metadata"].get("labels"), subject.seen.template) is not None:
            mark_workload(not marked(subject.obj["metadata"].get("labels")), ctx=self.ctx, subject=subject)


def _write_template(effect: WriteTemplate, current: _Pass) -> Step:
    write_template(effect.template, ctx=current.ctx, subject=current.subject)
    return DONE


def _ungate_pods(effect: UngatePods, current: _Pass) -> Step:
    pods = current.pods()
    return Step(
        again=ungate_pods(
            workloads=current.ctx.workloads, subject=current.subject, delivers=effect.delivers, pods=pods
        )
    )


def _write_report(effect: WriteReport, current: _Pass) -> Step:
    write_report(effect.report, ctx=current.ctx, subject=current.subject)
    return DONE


def _delete_stale_replica_sets(effect: DeleteStaleReplicaSets, current: _Pass) -> Step:
    # After the report: a failure here (RBAC, the API server) only delays the cleanup.
    return Step(again=delete_stale_replica_sets(ctx=current.ctx, subject=current.subject))


def _release_claims(effect: ReleaseClaims, current: _Pass) -> Step:
    return Step(
        again=release_claims(
            ctx=current.ctx, subject=current.subject, wanted=effect.wanted, pods=current.pods
        )
    )
