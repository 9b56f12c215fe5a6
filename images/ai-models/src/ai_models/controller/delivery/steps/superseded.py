"""Take back the shared claims a delivered workload no longer uses, or all of a workload whose
annotations were removed (`domain.delivery.superseded`, D100): mark, then delete after the grace.

Run only in a steady state (Delivered, or the annotations gone) and not in the pass that rewrote
the template (its new Pods are not made yet). The owned claims come from the claims informer
(`Subject.owned_claims`); the workload's Pods are listed only when an owned claim is neither wanted
nor in the template (the same list the ungating used in this pass, when it listed one). Each mark
and deletion is logged; a deletion also gets an Event on the workload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.conditions import timestamp
from ai_models.domain.delivery.superseded import ClaimChange, candidates, release
from ai_models.names import DeliveryEvent

log = logging.getLogger(__name__)
# A failed write (the API server, RBAC) is tried again this soon; it blocks nothing else.
RETRY_SECONDS: Final = 60.0
CONFLICT_RETRY_SECONDS: Final = 1.0


def release_claims(
    *,
    ctx: StepContext,
    subject: Subject,
    wanted: str | None,
    pods: Callable[[], Sequence[Mapping[str, Any]]],
) -> float | None:
    """Mark, unmark or delete the workload's claims; seconds until a grace period ends (or until a
    failed write is tried again), None when nothing waits."""
    workload = subject.seen.workload
    claims = subject.owned_claims
    if not claims:
        return None
    template = subject.seen.template
    now = ctx.clock()
    try:
        listed = (
            pods() if candidates(claims, workload_uid=workload.uid, wanted=wanted, template=template) else ()
        )
        verdict = release(
            claims,
            workload_uid=workload.uid,
            wanted=wanted,
            template=template,
            pods=listed,
            now=now,
            grace=ctx.settings.claim_grace,
        )
        for step in verdict.steps:
            extra = {**subject.log, "claim": step.claim}
            if step.change is ClaimChange.DELETE:
                if not ctx.objects.delete_claim(workload.namespace, step.claim, uid=step.uid):
                    continue  # gone already, or another claim has the name now
                since = timestamp(step.since) if step.since else "?"
                log.info(
                    "deleted the shared claim %s/%s of %s: no longer used since %s",
                    workload.namespace,
                    step.claim,
                    workload.describe(),
                    since,
                    extra=extra,
                )
                if ctx.events is not None:
                    ctx.events.record(
                        subject.obj,
                        type_="Normal",
                        reason=DeliveryEvent.SHARED_CLAIM_DELETED.value,
                        message=(
                            f"deleted the shared claim {step.claim}: neither the workload's models, its "
                            f"pod template nor its Pods have used it since {since}"
                        ),
                    )
                continue
            ctx.objects.patch_claim(workload.namespace, step.claim, step.patch())
            if step.change is ClaimChange.MARK:
                log.info(
                    "the shared claim %s/%s of %s is no longer used; deleted after %ss unless used again",
                    workload.namespace,
                    step.claim,
                    workload.describe(),
                    int(ctx.settings.claim_grace.total_seconds()),
                    extra=extra,
                )
            else:
                log.info(
                    "the shared claim %s/%s of %s is used again; no longer marked for deletion",
                    workload.namespace,
                    step.claim,
                    workload.describe(),
                    extra=extra,
                )
    except KubeError as error:
        if error.conflict:
            # The claim changed since this pass read it (its cache lagged behind a mark): look again
            # once the cache has caught up rather than write over what another pass wrote.
            log.debug("a shared claim of %s changed meanwhile", workload.describe(), extra=subject.log)
            return CONFLICT_RETRY_SECONDS
        log.warning(
            "cannot list the Pods of %s or mark or delete its shared claims (HTTP %s); trying again in %ss",
            workload.describe(),
            error.status,
            int(RETRY_SECONDS),
            extra=subject.log,
        )
        return RETRY_SECONDS
    if verdict.recheck_at is None:
        return None
    return max(0.0, (verdict.recheck_at - now).total_seconds())
