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

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.pages import page_items


class Conflict(Exception):
    """The object changed since it was read (or is gone): read it again and decide again."""


# kind -> (API class, the snake-case kind of its method names)
_APIS: dict[str, tuple[Any, str]] = {
    "Deployment": (k8s.AppsV1Api, "deployment"),
    "StatefulSet": (k8s.AppsV1Api, "stateful_set"),
    "DaemonSet": (k8s.AppsV1Api, "daemon_set"),
    "CronJob": (k8s.BatchV1Api, "cron_job"),
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
    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = (3, 30)) -> None:
        self._api_client = api_client
        self._core = k8s.CoreV1Api(api_client)
        self._timeout = timeout

    def _call(self, verb: str, kind: str, name: str, namespace: str, body: Any) -> None:
        api_class, snake = _APIS[kind]
        method = getattr(api_class(self._api_client), f"{verb}_namespaced_{snake}")
        try:
            response = method(name, namespace, body, _request_timeout=self._timeout, _preload_content=False)
        except ApiException as error:
            if error.status in (404, 409):
                raise Conflict(
                    f"{kind} {namespace}/{name} changed or is gone (HTTP {error.status})"
                ) from None
            raise
        response.release_conn()

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
        self._call("patch", kind, name, namespace, operations)

    def merge_annotations(
        self, kind: str, namespace: str, name: str, *, annotations: Mapping[str, str | None]
    ) -> None:
        """Set (a value) or remove (None) annotations of the workload."""
        self._call("patch", kind, name, namespace, {"metadata": {"annotations": dict(annotations)}})

    def pods(self, namespace: str, *, selector: str | None) -> list[dict[str, Any]]:
        """The Pods of `namespace` the label selector matches (every Pod with None)."""
        kwargs: dict[str, Any] = {"label_selector": selector} if selector else {}
        response = self._core.list_namespaced_pod(
            namespace, _request_timeout=self._timeout, _preload_content=False, **kwargs
        )
        return page_items(response)

    def replica_sets(self, namespace: str, *, selector: str) -> list[dict[str, Any]]:
        """The ReplicaSets of `namespace` the label selector matches (one list)."""
        response = k8s.AppsV1Api(self._api_client).list_namespaced_replica_set(
            namespace, label_selector=selector, _request_timeout=self._timeout, _preload_content=False
        )
        return page_items(response)

    def delete_replica_set(self, namespace: str, name: str, *, uid: str) -> bool:
        """Delete the ReplicaSet if it is still the object with `uid` (its Pods go with it, in the
        background); False when it is gone or another object has the name now."""
        try:
            response = k8s.AppsV1Api(self._api_client).delete_namespaced_replica_set(
                name,
                namespace,
                body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"},
                _request_timeout=self._timeout,
                _preload_content=False,
            )
        except ApiException as error:
            if error.status in (404, 409):
                return False
            raise
        response.release_conn()
        return True

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
            response = self._core.patch_namespaced_pod(
                meta["name"],
                meta["namespace"],
                operations,
                _request_timeout=self._timeout,
                _preload_content=False,
            )
        except ApiException as error:
            if error.status in (404, 409, 422):
                raise Conflict(f"Pod {meta['namespace']}/{meta['name']} changed or is gone") from None
            raise
        response.release_conn()
