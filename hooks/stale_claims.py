#!/usr/bin/env python3
"""Every 15 minutes, delete shared claims (`ai.deckhouse.io/shared-pvc=true`) no workload references.

A claim is referenced when its name is a `persistentVolumeClaim.claimName` in the pod template of a
Deployment, StatefulSet, DaemonSet, Job or CronJob (`spec.jobTemplate.spec.template`) of the claim's
namespace, whatever its replicas or pause, or in a Pod there. Claims younger than GRACE are kept:
the controller creates a claim before the workload that mounts it. Claims already being deleted are
left alone. The bindings are snapshot-only; the hook runs on its schedule alone.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

from deckhouse import hook

from ai_models.names import SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE
from lib.values import QUEUE, filter_results

CLAIMS = "shared_claims"
GRACE = dt.timedelta(hours=1)
TEMPLATE_CLAIMS = "[.spec.template.spec.volumes[]?.persistentVolumeClaim.claimName | select(. != null)]"
CRONJOB_CLAIMS = (
    "[.spec.jobTemplate.spec.template.spec.volumes[]?.persistentVolumeClaim.claimName | select(. != null)]"
)
POD_CLAIMS = "[.spec.volumes[]?.persistentVolumeClaim.claimName | select(. != null)]"
WORKLOADS: list[tuple[str, str, str, str]] = [
    ("deployments", "apps/v1", "Deployment", TEMPLATE_CLAIMS),
    ("statefulsets", "apps/v1", "StatefulSet", TEMPLATE_CLAIMS),
    ("daemonsets", "apps/v1", "DaemonSet", TEMPLATE_CLAIMS),
    ("jobs", "batch/v1", "Job", TEMPLATE_CLAIMS),
    ("cronjobs", "batch/v1", "CronJob", CRONJOB_CLAIMS),
    ("pods", "v1", "Pod", POD_CLAIMS),
]
BINDINGS = [CLAIMS, *(name for name, *_ in WORKLOADS)]


def _snapshot_binding(name: str, api_version: str, kind: str, jq_filter: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "apiVersion": api_version,
        "kind": kind,
        "keepFullObjectsInMemory": False,
        "executeHookOnEvent": [],
        "executeHookOnSynchronization": False,
        "queue": f"{QUEUE}/stale-claims",
        "jqFilter": jq_filter,
        **extra,
    }


config = json.dumps(
    {
        "configVersion": "v1",
        "schedule": [
            {
                "name": "stale_claims",
                "crontab": "*/15 * * * *",
                "allowFailure": True,
                "queue": f"{QUEUE}/stale-claims",
                "includeSnapshotsFrom": BINDINGS,
            }
        ],
        "kubernetes": [
            _snapshot_binding(
                CLAIMS,
                "v1",
                "PersistentVolumeClaim",
                "{namespace: .metadata.namespace, name: .metadata.name,"
                " created: .metadata.creationTimestamp, deleting: (.metadata.deletionTimestamp != null)}",
                labelSelector={"matchLabels": {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}},
            ),
            *(
                _snapshot_binding(
                    name, api_version, kind, f"{{namespace: .metadata.namespace, claims: {jq_claims}}}"
                )
                for name, api_version, kind, jq_claims in WORKLOADS
            ),
        ],
    },
    indent=2,
)


def _created(text: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def main(ctx: hook.Context) -> None:
    now = dt.datetime.now(dt.UTC)
    referenced: set[tuple[str, str]] = set()
    for name, *_ in WORKLOADS:
        for item in filter_results(ctx.snapshots, name):
            namespace = str(item.get("namespace") or "")
            referenced.update((namespace, str(claim)) for claim in item.get("claims") or [])
    for claim in filter_results(ctx.snapshots, CLAIMS):
        namespace, name = str(claim.get("namespace") or ""), str(claim.get("name") or "")
        if not namespace or not name or claim.get("deleting") or (namespace, name) in referenced:
            continue
        created = _created(claim.get("created"))
        if created is None or now - created < GRACE:
            continue
        print(f"stale claims: deleting {namespace}/{name}, no workload references it", file=sys.stderr)
        ctx.kubernetes.delete(kind="PersistentVolumeClaim", namespace=namespace, name=name, apiVersion="v1")


if __name__ == "__main__":
    hook.run(main, config=config)
