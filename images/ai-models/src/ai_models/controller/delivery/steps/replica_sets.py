"""Delete the ReplicaSets a delivered Deployment's gated-only template left behind, once the
current one is available (`domain.delivery.replica_sets`), with a log line and an Event each.

One list of the Deployment's ReplicaSets (its namespace and selector) per pass, and only for a
Deployment that has had more than one revision and was not found settled at its generation
already: a Deployment created for Ready models never has a second ReplicaSet, and a settled one
gets another only through a new template, which is a new generation.
"""

from __future__ import annotations

import logging
from typing import Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.workloads import label_selector
from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.replica_sets import may_have_stale, stale_replica_sets
from ai_models.names import DeliveryEvent

log = logging.getLogger(__name__)
# A failed list or delete (the API server, RBAC) is tried again this soon; it blocks nothing else.
RETRY_SECONDS: Final = 60.0


def delete_stale_replica_sets(*, ctx: StepContext, subject: Subject) -> float | None:
    """Delete what `stale_replica_sets` names; when to look again after a failure (else None: the
    Deployment's own status events bring the next pass once its new ReplicaSet is available)."""
    workload = subject.seen.workload
    if workload.kind is not WorkloadKind.DEPLOYMENT or not may_have_stale(subject.obj):
        return None
    meta = subject.obj.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    if ctx.settled.settled(subject.key, uid=workload.uid, generation=generation):
        return None
    selector = label_selector((subject.obj.get("spec") or {}).get("selector") or {})
    if selector is None:
        return None  # selects nothing: the API server refuses such a Deployment anyway
    try:
        verdict = stale_replica_sets(
            subject.obj, ctx.workloads.replica_sets(workload.namespace, selector=selector)
        )
        for replica_set in verdict.delete:
            if not ctx.workloads.delete_replica_set(
                workload.namespace, replica_set.name, uid=replica_set.uid
            ):
                continue  # gone already, or another object has the name now
            log.info(
                "deleted the stale ReplicaSet %s of Deployment %s/%s (made only by the delivery gate; "
                "the current ReplicaSet %s is available)",
                replica_set.name,
                workload.namespace,
                workload.name,
                verdict.current,
                extra={**subject.log, "replicaset": replica_set.name},
            )
            if ctx.events is not None:
                ctx.events.record(
                    subject.obj,
                    type_="Normal",
                    reason=DeliveryEvent.STALE_REPLICA_SET_DELETED.value,
                    message=(
                        f"deleted ReplicaSet {replica_set.name}: its pods waited for the models under "
                        f"the delivery gate; ReplicaSet {verdict.current} delivers them and is available"
                    ),
                )
    except KubeError as error:
        log.warning(
            "cannot list or delete the stale ReplicaSets of Deployment %s/%s (HTTP %s); trying again in %ss",
            workload.namespace,
            workload.name,
            error.status,
            int(RETRY_SECONDS),
            extra=subject.log,
        )
        return RETRY_SECONDS
    if verdict.settled:
        ctx.settled.mark(subject.key, uid=workload.uid, generation=generation)
    return None
