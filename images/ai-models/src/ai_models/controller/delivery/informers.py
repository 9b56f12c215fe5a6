"""What the delivery controller follows in every mode, cluster-wide, and how little of it it keeps.

- the four workload kinds, trimmed to what a pass reads: identity and annotations, the selector (to
  find the Pods to ungate) and the pod template (to compare and rewrite it whole); indexed by the
  models they name, so a Model's change finds its workloads, and by their report's reason, so a
  Node's change finds the workloads that wait for a larger cache;
- the shared claims (`ai.deckhouse.io/shared-pvc=true`), indexed by owner uid and by volume: in
  every mode, so the claims of an earlier SharedPVC delivery are taken back (D100, D111).

A mode follows more itself (`strategy.DeliveryStrategy.informers`). Model and ClusterModel objects
are not followed here: the controller's Model informers already hold them, and the leader hangs
`DeliveryRuntime.model_changed` on those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.informer import Informer, slim
from ai_models.adapters.kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    STATEFUL_SETS,
    Resource,
)
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.domain.delivery.contract import DeliveryRequest, WorkloadKind, parse
from ai_models.domain.delivery.report import report_of
from ai_models.domain.models.reference import ModelKey
from ai_models.names import SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE

WORKLOAD_RESOURCES: Final[Mapping[WorkloadKind, Resource]] = {
    WorkloadKind.DEPLOYMENT: DEPLOYMENTS,
    WorkloadKind.STATEFUL_SET: STATEFUL_SETS,
    WorkloadKind.DAEMON_SET: DAEMON_SETS,
    WorkloadKind.CRON_JOB: CRON_JOBS,
}
CLAIM_SELECTOR: Final = f"{SHARED_PVC_LABEL}={SHARED_PVC_LABEL_VALUE}"
BY_MODEL: Final = "model"
BY_REASON: Final = "reason"
BY_OWNER_UID: Final = "owner-uid"
BY_VOLUME: Final = "volume"
# Of a workload's metadata: who it is, the version a patch is guarded by, and what it carries.
WORKLOAD_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "annotations",
    "labels",
    "ownerReferences",
)


def trim_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """A workload without its status and the spec fields no pass reads (replicas, strategy, ...)."""
    slim(obj)
    kind = WorkloadKind(str(obj.get("kind")))
    meta = obj.get("metadata") or {}
    trimmed: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {key: meta[key] for key in WORKLOAD_METADATA if key in meta},
    }
    spec = obj.get("spec") or {}
    kept: dict[str, Any] = {}
    if "selector" in spec:
        kept["selector"] = spec["selector"]
    node: Any = obj
    for part in kind.template_path:
        node = node.get(part) if isinstance(node, Mapping) else None
    if isinstance(node, Mapping):
        target = kept
        for part in kind.template_path[1:-1]:
            target = target.setdefault(part, {})
        target[kind.template_path[-1]] = node
    trimmed["spec"] = kept
    return trimmed


def model_index_value(key: ModelKey) -> str:
    return str(key)


def models_named(obj: Mapping[str, Any]) -> Iterable[str]:
    request = parse(obj)
    if not isinstance(request, DeliveryRequest):
        return []
    return [model_index_value(key) for key in request.keys]


def reported_reason(obj: Mapping[str, Any]) -> Iterable[str]:
    report = report_of((obj.get("metadata") or {}).get("annotations") or {})
    return [report.reason.value] if report is not None else []


def claim_owner_uids(obj: Mapping[str, Any]) -> Iterable[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [str(ref["uid"]) for ref in refs if isinstance(ref, Mapping) and ref.get("uid")]


def claim_volume(obj: Mapping[str, Any]) -> Iterable[str]:
    volume = (obj.get("spec") or {}).get("volumeName")
    return [str(volume)] if volume else []


class DeliveryInformers:
    """The workloads and the shared claims, followed in every mode."""

    def __init__(self, api_client: Any, *, resync_seconds: float | None = None) -> None:
        self.workloads = {
            kind: Informer(
                api_client,
                resource,
                name=f"delivery-{resource.plural}",
                transform=trim_workload,
                indexers={BY_MODEL: models_named, BY_REASON: reported_reason},
                resync_seconds=resync_seconds,
            )
            for kind, resource in WORKLOAD_RESOURCES.items()
        }
        self.claims = Informer(
            api_client,
            PERSISTENT_VOLUME_CLAIMS,
            name="shared-claims",
            label_selector=CLAIM_SELECTOR,
            indexers={BY_OWNER_UID: claim_owner_uids, BY_VOLUME: claim_volume},
        )

    def all(self) -> list[Informer]:
        return [*self.workloads.values(), self.claims]

    def reporting(self, reason: str) -> list[WorkloadKey]:
        """The workloads whose delivery report has this reason."""
        found = []
        for kind, informer in self.workloads.items():
            for obj in informer.by_index(BY_REASON, reason):
                meta = obj["metadata"]
                found.append(WorkloadKey(kind, str(meta.get("namespace") or ""), str(meta["name"])))
        return found

    def workload(self, key: WorkloadKey) -> dict[str, Any] | None:
        """A copy of the cached workload."""
        return self.workloads[key.kind].get(key.namespace, key.name)

    def using(self, model: ModelKey) -> list[WorkloadKey]:
        """The workloads whose annotations name `model`."""
        found = []
        for kind, informer in self.workloads.items():
            for obj in informer.by_index(BY_MODEL, model_index_value(model)):
                meta = obj["metadata"]
                found.append(WorkloadKey(kind, str(meta.get("namespace") or ""), str(meta["name"])))
        return found
