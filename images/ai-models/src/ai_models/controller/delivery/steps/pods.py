"""Take the delivery scheduling gate off the workload's Pods, and nothing else.

The Pods are listed by the workload's selector in its namespace (a CronJob has none: its Jobs' Pods
are told by their owner), and only the workload's own are touched: a Pod owned by the workload, by
one of its ReplicaSets (`<name>-<hash>`) or by one of a CronJob's Jobs (`<name>-<time>`). While
the workload delivers, only Pods that get the models the template's record names lose the gate
(`delivers`: they mount its claim, or have its node cache volumes with its digests): a Pod of an
older template, gated while its model was not Ready, would start without its models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.adapters.kube.workloads import Conflict, Workloads, label_selector
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.claims import claims_mounted
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.template import Applied, cache_volumes
from ai_models.names import DELIVERY_SCHEDULING_GATE

# A Pod changed between the list and the patch is looked at again this soon.
CONFLICT_RECHECK_SECONDS = 1.0
_OWNER_KIND = {
    WorkloadKind.DEPLOYMENT: "ReplicaSet",
    WorkloadKind.STATEFUL_SET: "StatefulSet",
    WorkloadKind.DAEMON_SET: "DaemonSet",
    WorkloadKind.CRON_JOB: "Job",
}


def owned_by(pod: Mapping[str, Any], workload: Workload) -> bool:
    wanted = _OWNER_KIND[workload.kind]
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        name = str(ref.get("name") or "")
        if ref.get("kind") != wanted:
            continue
        if workload.kind in (WorkloadKind.DEPLOYMENT, WorkloadKind.CRON_JOB):
            if name.startswith(f"{workload.name}-"):
                return True
        elif name == workload.name:
            return True
    return False


def _delivers(pod: Mapping[str, Any], record: Applied) -> bool:
    """Whether the Pod gets the models the way the template's record says: it mounts the recorded
    claim (SharedPVC), or has the module's CSI volume of each recorded model with the recorded
    digest (NodeCache)."""
    if record.claim is not None:
        return record.claim in claims_mounted(pod)
    wanted = {(volume, model.digest) for volume, model in zip(record.volumes, record.models, strict=True)}
    return wanted <= cache_volumes(pod)


def _gated(pod: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if not any(isinstance(item, Mapping) and item.get("name") == DELIVERY_SCHEDULING_GATE for item in gates):
        return None
    return [
        item
        for item in gates
        if not (isinstance(item, Mapping) and item.get("name") == DELIVERY_SCHEDULING_GATE)
    ]


def selected_pods(*, workloads: Workloads, subject: Subject) -> list[dict[str, Any]]:
    """The Pods the workload's selector matches in its namespace (one list; for a CronJob, its pod
    template's labels): what a pass ungates, and what keeps a claim the workload no longer wants."""
    workload = subject.seen.workload
    spec = subject.obj.get("spec") or {}
    if workload.kind is WorkloadKind.CRON_JOB:
        labels = ((subject.seen.template.get("metadata") or {}).get("labels")) or {}
        selector = label_selector({"matchLabels": labels}) if labels else None
    else:
        selector = label_selector(spec.get("selector") or {})
        if selector is None:
            return []  # selects nothing: the API server refuses such a workload anyway
    return workloads.pods(workload.namespace, selector=selector)


def ungate_pods(
    *,
    workloads: Workloads,
    subject: Subject,
    delivers: Applied | None,
    pods: Sequence[Mapping[str, Any]] | None = None,
) -> float | None:
    """Remove the gate from the workload's Pods (those that get what the record `delivers` names,
    when given); when to look again if a Pod changed meanwhile. `pods`: those `selected_pods`
    listed already in this pass."""
    workload = subject.seen.workload
    again: float | None = None
    for pod in selected_pods(workloads=workloads, subject=subject) if pods is None else pods:
        remaining = _gated(pod)
        if remaining is None or not owned_by(pod, workload):
            continue
        if delivers is not None and not _delivers(pod, delivers):
            continue
        try:
            workloads.set_scheduling_gates(pod, gates=remaining)
        except Conflict:
            again = CONFLICT_RECHECK_SECONDS
    return again
