"""One small step per kind of I/O a `domain.delivery.decision.DeliveryAction` asks for; `run` does
them in the order that keeps every intermediate state safe: the claim and its Job first, then the
template that mounts the claim, then the Pods' gates, and the report (it says what was done); the
stale ReplicaSets of a delivered Deployment and the claims a steady workload no longer uses go
after it."""

from __future__ import annotations

from typing import Any

from ai_models.adapters.kube.jobs import ObjectRefused
from ai_models.controller.delivery.observe import Subject
from ai_models.controller.delivery.steps.claims import create_claim, patch_claim
from ai_models.controller.delivery.steps.context import DeliverySettings, Notifier, StepContext
from ai_models.controller.delivery.steps.materialize import remove_job, start_materialization
from ai_models.controller.delivery.steps.pods import selected_pods, ungate_pods
from ai_models.controller.delivery.steps.replica_sets import delete_stale_replica_sets
from ai_models.controller.delivery.steps.report import write_report
from ai_models.controller.delivery.steps.superseded import release_claims
from ai_models.controller.delivery.steps.template import write_template
from ai_models.domain.delivery.decision import ANNOTATIONS_REMOVED, SLOT_RECHECK_SECONDS, DeliveryAction
from ai_models.domain.delivery.report import DeliveryReport
from ai_models.domain.delivery.template import applied
from ai_models.names import DeliveryReason

__all__ = ["DeliverySettings", "Notifier", "StepContext", "run"]

WAITING_FOR_SLOT = "waiting_for_a_materialization_slot"


def run(action: DeliveryAction, *, ctx: StepContext, subject: Subject) -> float | None:
    """Do what `action` says; when to look at the workload again."""
    if action.rule == WAITING_FOR_SLOT:
        ctx.notify.waiting_for_slot(subject.key)
    else:
        ctx.notify.got_slot(subject.key)
    if action.create_claim is not None:
        try:
            create_claim(action.create_claim, ctx=ctx, subject=subject)
        except ObjectRefused as error:
            if error.temporary:
                raise
            return _refused(
                error,
                DeliveryReason.SHARED_PVC_CLAIM_PENDING,
                "a ResourceQuota or an admission policy of the namespace, or the controller's RBAC, "
                "does not let it be created",
                ctx=ctx,
                subject=subject,
            )
    if action.claim_patch is not None:
        patch_claim(action.claim_patch, ctx=ctx, subject=subject)
    if action.remove_failed_job or action.remove_finished_job:
        remove_job(ctx=ctx, subject=subject)
    if action.start_materialization is not None:
        try:
            started = start_materialization(action.start_materialization, ctx=ctx, subject=subject)
        except ObjectRefused as error:
            if error.temporary:
                raise
            return _refused(
                error,
                DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
                "the materializer pod template the module's Helm chart renders, or an admission "
                "policy or quota of the namespace, does not let it be created",
                ctx=ctx,
                subject=subject,
            )
        if not started:
            return SLOT_RECHECK_SECONDS  # the report says so on the next pass
    if action.template is not None:
        write_template(action.template, ctx=ctx, subject=subject)
    again = action.requeue
    listed: list[dict[str, Any]] | None = None  # the Pods, listed at most once per pass
    if action.ungate_pods:
        mounted = applied(action.template if action.template is not None else subject.seen.template)
        record = mounted if subject.seen.request is not None else None
        listed = selected_pods(workloads=ctx.workloads, subject=subject)
        retry = ungate_pods(workloads=ctx.workloads, subject=subject, delivers=record, pods=listed)
        if retry is not None:
            again = retry if again is None else min(again, retry)
    write_report(action.report, ctx=ctx, subject=subject)
    # After the report: a failure here (RBAC, the API server) only delays the cleanup. Not in the
    # pass that wrote the template: its ReplicaSet is not even made yet.
    delivered = action.report is not None and action.report.reason is DeliveryReason.DELIVERED
    if action.template is None and delivered:
        retry = delete_stale_replica_sets(ctx=ctx, subject=subject)
        if retry is not None:
            again = retry if again is None else min(again, retry)
    if action.template is None and (delivered or action.rule == ANNOTATIONS_REMOVED):
        retry = release_claims(
            ctx=ctx,
            subject=subject,
            wanted=subject.seen.claim.name if delivered and subject.seen.claim is not None else None,
            pods=lambda: (
                listed if listed is not None else selected_pods(workloads=ctx.workloads, subject=subject)
            ),
        )
        if retry is not None:
            again = retry if again is None else min(again, retry)
    return again


def _refused(
    error: ObjectRefused, reason: DeliveryReason, cause: str, *, ctx: StepContext, subject: Subject
) -> float:
    """The API server refused an object of the delivery for good: say which and why, and try again
    after the retry period (a temporary refusal backs off instead)."""
    retry = ctx.settings.materialization_retry
    message = f"{error}; {cause}; the module tries again in {int(retry.total_seconds())}s"
    write_report(DeliveryReport(reason, message), ctx=ctx, subject=subject)
    return retry.total_seconds()
