"""Typed writes to top-level workloads (Deployment, StatefulSet, DaemonSet, CronJob) and their Pods,
for workload delivery: the pod template replaced whole under a resourceVersion guard, annotations
merged, Pods listed by selector and a scheduling gate taken off one Pod, a Deployment's ReplicaSets
listed and a stale one deleted.

Every write carries the resourceVersion it was computed from: a workload or Pod changed since is
refused (409 Conflict, `Conflict`) instead of overwritten, and the caller looks again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import JSON_PATCH, MERGE_PATCH, Objects
from ai_models.adapters.kube.resources import (
    CRON_JOBS,
    DAEMON_SETS,
    DEPLOYMENTS,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
    Resource,
)


class Conflict(Exception):
    """The object changed since it was read (or is gone): read it again and decide again."""


WORKLOADS: dict[str, Resource] = {
    resource.kind: resource for resource in (DEPLOYMENTS, STATEFUL_SETS, DAEMON_SETS, CRON_JOBS)
}


def label_selector(selector: Mapping[str, Any]) -> str | None:
    """A LabelSelector object as the `labelSelector` query; None when it selects nothing."""
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(str(item) for item in expression.get("values") or ())
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(str(key))
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None


class Workloads:
    def __init__(self, api_client: Any) -> None:
        self._workloads = {kind: Objects(api_client, resource) for kind, resource in WORKLOADS.items()}
        self._pods = Objects(api_client, PODS)
        self._replica_sets = Objects(api_client, REPLICA_SETS)

    def _patch(
        self, kind: str, namespace: str, name: str, patch: Any, *, content_type: str = MERGE_PATCH
    ) -> None:
        try:
            self._workloads[kind].patch(name, patch, namespace, content_type=content_type)
        except KubeError as error:
            if error.not_found or error.conflict:
                raise Conflict(
                    f"{kind} {namespace}/{name} changed or is gone (HTTP {error.status})"
                ) from None
            raise

    def replace_template(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        pointer: str,
        template: Mapping[str, Any],
    ) -> None:
        """Replace the pod template at the JSON pointer `pointer`, if the workload is still at
        `resource_version` (the whole template: the cache holds it whole, and a list merge could not
        take away what the module added)."""
        operations = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "replace", "path": pointer, "value": dict(template)},
        ]
        self._patch(kind, namespace, name, operations, content_type=JSON_PATCH)

    def merge_annotations(
        self, kind: str, namespace: str, name: str, *, annotations: Mapping[str, str | None]
    ) -> None:
        """Set (a value) or remove (None) annotations of the workload."""
        self._patch(kind, namespace, name, {"metadata": {"annotations": dict(annotations)}})

    def merge_labels(self, kind: str, namespace: str, name: str, *, labels: Mapping[str, str | None]) -> None:
        """Set (a value) or remove (None) labels of the workload."""
        self._patch(kind, namespace, name, {"metadata": {"labels": dict(labels)}})

    def pods(self, namespace: str, *, selector: str | None) -> list[dict[str, Any]]:
        """The Pods of `namespace` the label selector matches (every Pod with None)."""
        return list(self._pods.list_all(namespace, label_selector=selector))

    def replica_sets(self, namespace: str, *, selector: str) -> list[dict[str, Any]]:
        """The ReplicaSets of `namespace` the label selector matches."""
        return list(self._replica_sets.list_all(namespace, label_selector=selector))

    def delete_replica_set(self, namespace: str, name: str, *, uid: str) -> bool:
        """Delete the ReplicaSet if it is still the object with `uid` (its Pods go with it, in the
        background); False when it is gone or another object has the name now."""
        return self._replica_sets.delete(name, namespace, uid=uid, propagation="Background")

    def set_scheduling_gates(self, pod: Mapping[str, Any], *, gates: Sequence[Mapping[str, Any]]) -> None:
        """Leave the Pod only `gates` (a subset of its own: gates may only be removed)."""
        meta = pod["metadata"]
        operations: list[dict[str, Any]] = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}
        ]
        if gates:
            operations.append({"op": "replace", "path": "/spec/schedulingGates", "value": list(gates)})
        else:
            operations.append({"op": "remove", "path": "/spec/schedulingGates"})
        try:
            self._pods.patch(meta["name"], operations, meta["namespace"], content_type=JSON_PATCH)
        except KubeError as error:
            # 422: the JSON patch no longer applies (the gates it replaces or removes are gone).
            if error.not_found or error.conflict or error.status == 422:
                raise Conflict(f"Pod {meta['namespace']}/{meta['name']} changed or is gone") from None
            raise
