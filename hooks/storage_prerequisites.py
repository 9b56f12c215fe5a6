#!/usr/bin/env python3
"""Storage-prerequisites verdict into `aiModels.internal.storagePrerequisites` and a metric.

Runs the evaluator the controller runs (`ai_models.domain.storage.prerequisites`) on the same inputs:
StorageClasses and the shared claims (`ai.deckhouse.io/shared-pvc=true`, all namespaces) in SharedPVC
mode, node labels in NodeCache mode. A claim counts by the controller's rule
(`domain.delivery.read_write_many.claim_facts`): only one the module made (`claims.made_by_module`),
so a claim someone else labels, Lost or Pending, changes nothing. One input is missing here:
`ProvisioningFailed` Events cannot be watched cheaply from a hook, so a Pending claim never counts as
failed; the hook still reports `ReadWriteManyFailed` for a Lost module claim, and the controller's
collector (which reads the Events) is authoritative for `ReadWriteManyFailed` by Events.

Metric `d8_ai_models_storage_prerequisites_satisfied{mode,reason}` in group
`d8_ai_models_storage_prerequisites`: each run replaces the group's series, so a changed reason
leaves no stale series.
"""

from __future__ import annotations

import json
from typing import Any

from deckhouse import hook

from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.storage.prerequisites import StorageInputs, evaluate
from ai_models.names import (
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
    STORAGE_PREREQUISITES_METRIC,
    STORAGE_PREREQUISITES_METRIC_GROUP,
)
from lib.storage import (
    SHARED_CLAIM_JQ,
    STORAGE_CLASS_JQ,
    shared_claim_facts,
    storage_class_facts,
)
from lib.values import QUEUE, dig, filter_results, internal, setting

STORAGE_CLASSES = "storage_classes"
SHARED_CLAIMS = "shared_claims"
NODES = "nodes"
BINDINGS = [STORAGE_CLASSES, SHARED_CLAIMS, NODES]
METRIC = STORAGE_PREREQUISITES_METRIC
METRIC_GROUP = STORAGE_PREREQUISITES_METRIC_GROUP


def _binding(name: str, api_version: str, kind: str, jq_filter: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "apiVersion": api_version,
        "kind": kind,
        "queue": f"{QUEUE}/storage",
        "keepFullObjectsInMemory": False,
        "includeSnapshotsFrom": BINDINGS,
        "jqFilter": jq_filter,
        **extra,
    }


config = json.dumps(
    {
        "configVersion": "v1",
        "beforeHelm": 10,
        "kubernetes": [
            _binding(STORAGE_CLASSES, "storage.k8s.io/v1", "StorageClass", STORAGE_CLASS_JQ),
            _binding(
                SHARED_CLAIMS,
                "v1",
                "PersistentVolumeClaim",
                SHARED_CLAIM_JQ,
                labelSelector={"matchLabels": {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}},
            ),
            # Only the labels: a node's status updates do not change the filter result, so they
            # do not run the hook.
            _binding(NODES, "v1", "Node", "{labels: (.metadata.labels // {})}"),
        ],
    },
    indent=2,
)


def read_inputs(values: dict[str, Any], snapshots: dict[str, Any]) -> StorageInputs:
    mode = DeliveryMode(setting(values, "delivery", "mode") or DeliveryMode.SHARED_PVC)
    shared = mode is DeliveryMode.SHARED_PVC
    selector = setting(values, "delivery", "nodeCache", "nodeSelector")
    return StorageInputs(
        mode=mode,
        shared_pvc_storage_class=setting(values, "delivery", "sharedPVCStorageClassName") or None,
        global_storage_class=dig(values, "global", "defaultClusterStorageClass") or None,
        storage_classes=storage_class_facts(filter_results(snapshots, STORAGE_CLASSES)) if shared else (),
        shared_claims=shared_claim_facts(filter_results(snapshots, SHARED_CLAIMS)) if shared else (),
        node_cache_size=setting(values, "delivery", "nodeCache", "size") or None,
        node_cache_selector=dict(selector) if isinstance(selector, dict) else {},
        node_labels=()
        if shared
        else tuple(dict(item.get("labels") or {}) for item in filter_results(snapshots, NODES)),
    )


def main(ctx: hook.Context) -> None:
    values: dict[str, Any] = ctx.values
    verdict = evaluate(read_inputs(values, ctx.snapshots))
    internal(values)["storagePrerequisites"] = {
        "mode": str(verdict.mode),
        "satisfied": verdict.satisfied,
        "reason": str(verdict.reason),
        "message": verdict.message,
    }
    ctx.metrics.collect(
        {
            "name": METRIC,
            "group": METRIC_GROUP,
            "action": "set",
            "value": 1.0 if verdict.satisfied else 0.0,
            "labels": {"mode": str(verdict.mode), "reason": str(verdict.reason)},
        }
    )


if __name__ == "__main__":
    hook.run(main, config=config)
