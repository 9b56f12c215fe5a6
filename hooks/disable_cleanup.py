#!/usr/bin/env python3
"""Take back what the module left in user namespaces when it is disabled (afterDeleteHelm, D158).

Helm has deleted the controller, the admission webhook configuration and the CSIDriver by now, so
nothing would ever finish what they started. This hook:

- strips from every workload labelled `DELIVERY_TEMPLATE_LABEL` what the module added to its pod
  template (record, volumes, mounts, variables, node selector entries, the scheduling gate), its
  delivery report and the label (`domain.delivery.disable.workload_patch`): new Pods start;
- takes the module's finalizer off every Model, ClusterModel and ModelCatalogSource: namespaces
  with Models delete, and so do the objects;
- ungates a Pending Pod held by the delivery gate that has none of the module's volumes, and
  deletes one that has (its owner makes a new one from the stripped template);
- deletes the materialize Jobs and their Secrets (token, image pull copy): transient objects;
- takes the node plugin's readiness label and cache report off the Nodes;
- keeps the shared claims (they hold the model files; an administrator may keep them) and logs
  each with the command that deletes them.

Every binding exists for this run only: no event and no Synchronization runs the hook, and each
jqFilter keeps only what a patch needs. The workloads and Pods the module touched are found by the
label and by `status.phase=Pending`, never by watching every workload.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from deckhouse import hook

from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.disable import (
    REPORT_ANNOTATIONS,
    GatedPod,
    PodAction,
    finalizer_patch,
    node_patch,
    workload_patch,
)
from ai_models.domain.delivery.template import CONTAINER_LISTS
from ai_models.names import (
    API_GROUP,
    API_VERSION,
    CATALOG_FINALIZER,
    COMPONENT_LABEL,
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_TEMPLATE_LABEL,
    DELIVERY_TEMPLATE_LABEL_VALUE,
    MATERIALIZATION_COMPONENT,
    MODEL_FINALIZER,
    MODULE,
    MODULE_LABEL,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
    SHARED_PVC_VOLUME,
)
from lib.values import QUEUE, filter_results

QUEUE_NAME = f"{QUEUE}/disable-cleanup"
CUSTOM_API_VERSION = f"{API_GROUP}/{API_VERSION}"
WORKLOAD_BINDINGS = {
    WorkloadKind.DEPLOYMENT: "deployments",
    WorkloadKind.STATEFUL_SET: "statefulsets",
    WorkloadKind.DAEMON_SET: "daemonsets",
    WorkloadKind.CRON_JOB: "cronjobs",
}
# (binding, kind, finalizer): the module's own objects that carry its finalizers.
FINALIZED = (
    ("models", "Model", MODEL_FINALIZER),
    ("clustermodels", "ClusterModel", MODEL_FINALIZER),
    ("catalogsources", "ModelCatalogSource", CATALOG_FINALIZER),
)
PODS, JOBS, SECRETS, CLAIMS = "gated_pods", "materialize_jobs", "materialize_secrets", "shared_claims"
NODES = "cache_nodes"
MATERIALIZATION = {COMPONENT_LABEL: MATERIALIZATION_COMPONENT, MODULE_LABEL: MODULE}


def _binding(name: str, api_version: str, kind: str, jq_filter: str, **selectors: Any) -> dict[str, Any]:
    return {
        "name": name,
        "apiVersion": api_version,
        "kind": kind,
        **selectors,
        # Only the afterDeleteHelm run reads these snapshots.
        "executeHookOnEvent": [],
        "executeHookOnSynchronization": False,
        "keepFullObjectsInMemory": False,
        "queue": QUEUE_NAME,
        "jqFilter": jq_filter,
    }


def _template_filter(path: Sequence[str]) -> str:
    """The parts of the pod template `strip` reads, whole (a list the patch replaces must be)."""
    containers = ", ".join(
        f"{field}: ((.spec.{field} // []) | map({{name, env, volumeMounts}} "
        "| with_entries(select(.value != null))))"
        for field in CONTAINER_LISTS
    )
    return (
        f"(.{'.'.join(path)} // {{}}) | {{metadata: {{annotations: (.metadata.annotations // {{}})}}, "
        f"spec: ({{schedulingGates: .spec.schedulingGates, volumes: .spec.volumes, "
        f"nodeSelector: .spec.nodeSelector, {containers}}} "
        "| with_entries(select(.value != null and .value != [])))}"
    )


REPORT_KEYS = ", ".join(json.dumps(name) for name in REPORT_ANNOTATIONS)


def _workload_filter(kind: WorkloadKind) -> str:
    return (
        "{namespace: .metadata.namespace, name: .metadata.name, "
        # Only the report's annotation keys: a patch may remove only those.
        f"annotations: [(.metadata.annotations // {{}}) | keys[] | select(IN({REPORT_KEYS}))], "
        f"template: ({_template_filter(kind.template_path)})}}"
    )


NAME_FILTER = "{namespace: .metadata.namespace, name: .metadata.name}"
FINALIZERS_FILTER = (
    "{namespace: .metadata.namespace, name: .metadata.name, finalizers: (.metadata.finalizers // [])}"
)
POD_FILTER = (
    "{namespace: .metadata.namespace, name: .metadata.name, "
    "gates: [(.spec.schedulingGates // [])[] | .name], "
    "moduleVolumes: ([(.spec.volumes // [])[] | select("
    f"(.name == {json.dumps(SHARED_PVC_VOLUME)} and .persistentVolumeClaim != null) or "
    f'((.csi.driver // "") == {json.dumps(NODE_CACHE_DRIVER)}))] | length > 0)}}'
)
CLAIM_FILTER = (
    "{namespace: .metadata.namespace, name: .metadata.name, "
    '"storage": (.status.capacity.storage // .spec.resources.requests.storage // "")}'
)

config = json.dumps(
    {
        "configVersion": "v1",
        "afterDeleteHelm": 10,
        "kubernetes": [
            *(
                _binding(
                    binding,
                    kind.api_version,
                    str(kind),
                    _workload_filter(kind),
                    labelSelector={"matchLabels": {DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE}},
                )
                for kind, binding in WORKLOAD_BINDINGS.items()
            ),
            *(
                _binding(binding, CUSTOM_API_VERSION, kind, FINALIZERS_FILTER)
                for binding, kind, _ in FINALIZED
            ),
            _binding(
                PODS,
                "v1",
                "Pod",
                POD_FILTER,
                fieldSelector={
                    "matchExpressions": [{"field": "status.phase", "operator": "Equals", "value": "Pending"}]
                },
            ),
            _binding(JOBS, "batch/v1", "Job", NAME_FILTER, labelSelector={"matchLabels": MATERIALIZATION}),
            _binding(SECRETS, "v1", "Secret", NAME_FILTER, labelSelector={"matchLabels": MATERIALIZATION}),
            _binding(
                NODES,
                "v1",
                "Node",
                "{name: .metadata.name}",
                labelSelector={"matchExpressions": [{"key": NODE_CACHE_READY_LABEL, "operator": "Exists"}]},
            ),
            _binding(
                CLAIMS,
                "v1",
                "PersistentVolumeClaim",
                CLAIM_FILTER,
                labelSelector={"matchLabels": {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}},
            ),
        ],
    },
    indent=2,
)


def _where(item: Mapping[str, Any]) -> str:
    namespace = item.get("namespace")
    return f"{namespace}/{item['name']}" if namespace else str(item["name"])


def strip_workloads(ctx: hook.Context) -> None:
    for kind, binding in WORKLOAD_BINDINGS.items():
        for item in filter_results(ctx.snapshots, binding):
            patch = workload_patch(
                kind, template=item.get("template") or {}, annotations=item.get("annotations") or ()
            )
            ctx.kubernetes.json_patch(
                str(kind),
                item["namespace"],
                item["name"],
                patch,
                apiVersion=kind.api_version,
                ignoreMissingObject=True,
            )
            print(
                f"disable: {kind} {_where(item)}: the module's part of its pod template removed",
                file=sys.stderr,
            )


def remove_finalizers(ctx: hook.Context) -> None:
    for binding, kind, finalizer in FINALIZED:
        for item in filter_results(ctx.snapshots, binding):
            patch = finalizer_patch(item.get("finalizers") or (), finalizer)
            if patch:
                ctx.kubernetes.json_patch(
                    kind,
                    item.get("namespace") or "",
                    item["name"],
                    patch,
                    apiVersion=CUSTOM_API_VERSION,
                    ignoreMissingObject=True,
                )


def release_pods(ctx: hook.Context) -> None:
    for item in filter_results(ctx.snapshots, PODS):
        pod = GatedPod(
            namespace=item["namespace"],
            name=item["name"],
            gates=tuple(str(gate) for gate in item.get("gates") or ()),
            module_volumes=bool(item.get("moduleVolumes")),
        )
        if pod.action is PodAction.UNGATE:
            ctx.kubernetes.json_patch(
                "Pod", pod.namespace, pod.name, pod.ungate_patch(), apiVersion="v1", ignoreMissingObject=True
            )
        elif pod.action is PodAction.DELETE:
            ctx.kubernetes.delete("Pod", pod.namespace, pod.name, apiVersion="v1")
            print(
                f"disable: Pod {_where(item)} waited for {DELIVERY_SCHEDULING_GATE} with a volume of "
                "the module; deleted, its owner makes a new one",
                file=sys.stderr,
            )


def remove_materialization(ctx: hook.Context) -> None:
    for item in filter_results(ctx.snapshots, JOBS):
        ctx.kubernetes.delete_in_backgroud("Job", item["namespace"], item["name"], apiVersion="batch/v1")
    for item in filter_results(ctx.snapshots, SECRETS):
        ctx.kubernetes.delete("Secret", item["namespace"], item["name"], apiVersion="v1")


def clear_nodes(ctx: hook.Context) -> None:
    for item in filter_results(ctx.snapshots, NODES):
        ctx.kubernetes.merge_patch(
            "Node", "", item["name"], node_patch(), apiVersion="v1", ignoreMissingObject=True
        )


def report_claims(snapshots: Mapping[str, Any]) -> None:
    for item in filter_results(snapshots, CLAIMS):
        size = f" ({item['storage']})" if item.get("storage") else ""
        print(
            f"disable: shared claim {_where(item)}{size} keeps its model files; delete it when no longer "
            f"needed: kubectl -n {item['namespace']} delete pvc {item['name']}",
            file=sys.stderr,
        )


def main(ctx: hook.Context) -> None:
    strip_workloads(ctx)
    remove_finalizers(ctx)
    release_pods(ctx)
    remove_materialization(ctx)
    clear_nodes(ctx)
    report_claims(ctx.snapshots)


if __name__ == "__main__":
    hook.run(main, config=config)
