#!/usr/bin/env python3
"""Every 15 minutes, delete the shared claims the module made that nothing references any more.

Only a claim the module made is ever touched (`domain.delivery.claims.made_by_module`: the
`ai.deckhouse.io/shared-pvc=true` and module labels, and an owner-UID label equal to one of its
ownerReferences); any other claim, labelled or not, is left alone. A claim is referenced while a
Deployment, StatefulSet, DaemonSet, Job or CronJob (`spec.jobTemplate.spec.template`) of its
namespace mounts it in its pod template, whatever its replicas or pause, or a Pod there does, or
while the workload that owns it exists (its delivery may be waiting to mount it); what the claim
owns itself (its materialize Job and that Job's Pods) is no reference (`claims.claim_referenced`). Nothing is
deleted on a single observation: the first pass that finds a claim unreferenced records when, in
the annotation `ai.deckhouse.io/unreferenced-since`, and a later pass deletes it once GRACE has
passed since; a claim referenced again loses the annotation, unless its owning workload exists: then
the delivery controller owns the mark (it marks, and deletes, the claims a workload no longer uses,
D100). The bindings are snapshot-only; the hook runs on its schedule alone.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Mapping
from typing import Any

from deckhouse import hook

from ai_models.domain.conditions import parse_timestamp, timestamp
from ai_models.domain.delivery.claims import (
    ClaimUser,
    SharedClaim,
    Staleness,
    claim_referenced,
    claim_verdict,
)
from ai_models.names import SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE, SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION
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
                "{namespace: .metadata.namespace, name: .metadata.name, uid: .metadata.uid,"
                " labels: (.metadata.labels // {}), owners: [.metadata.ownerReferences[]?.uid],"
                " deleting: (.metadata.deletionTimestamp != null),"
                f' since: (.metadata.annotations["{SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION}"] // null)}}',
                labelSelector={"matchLabels": {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}},
            ),
            *(
                _snapshot_binding(
                    name,
                    api_version,
                    kind,
                    "{namespace: .metadata.namespace, uid: .metadata.uid,"
                    f" owners: [.metadata.ownerReferences[]?.uid], claims: {jq_claims}}}",
                )
                for name, api_version, kind, jq_claims in WORKLOADS
            ),
        ],
    },
    indent=2,
)


def _mark(ctx: hook.Context, namespace: str, name: str, since: str | None) -> None:
    ctx.kubernetes.merge_patch(
        kind="PersistentVolumeClaim",
        namespace=namespace,
        name=name,
        apiVersion="v1",
        patch={"metadata": {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: since}}},
        ignoreMissingObject=True,
    )


def _users(snapshots: Mapping[str, Any]) -> dict[str, list[ClaimUser]]:
    """What references claims, by namespace: the workloads and Pods of the snapshots."""
    users: dict[str, list[ClaimUser]] = {}
    for name, *_ in WORKLOADS:
        for item in filter_results(snapshots, name):
            user = ClaimUser(
                namespace=str(item.get("namespace") or ""),
                uid=str(item.get("uid") or ""),
                claims=frozenset(str(claim) for claim in item.get("claims") or []),
                owner_uids=frozenset(str(uid) for uid in item.get("owners") or []),
            )
            users.setdefault(user.namespace, []).append(user)
    return users


def _claim(item: dict[str, Any]) -> SharedClaim:
    return SharedClaim(
        namespace=str(item.get("namespace") or ""),
        name=str(item.get("name") or ""),
        labels={str(key): str(value) for key, value in (item.get("labels") or {}).items()},
        owner_uids=frozenset(str(uid) for uid in item.get("owners") or []),
        deleting=bool(item.get("deleting")),
        uid=str(item.get("uid") or ""),
    )


def main(ctx: hook.Context) -> None:
    now = dt.datetime.now(dt.UTC)
    users = _users(ctx.snapshots)
    for item in filter_results(ctx.snapshots, CLAIMS):
        claim = _claim(item)
        if not claim.namespace or not claim.name:
            continue
        since = parse_timestamp(item.get("since"))
        namespace_users = users.get(claim.namespace, [])
        referenced = claim_referenced(claim, namespace_users)
        verdict = claim_verdict(claim, referenced=referenced, first_unreferenced=since, now=now, grace=GRACE)
        if verdict.staleness is Staleness.STALE:
            print(
                f"stale claims: deleting {claim.namespace}/{claim.name}, "
                f"unreferenced since {item.get('since')}",
                file=sys.stderr,
            )
            ctx.kubernetes.delete(
                kind="PersistentVolumeClaim", namespace=claim.namespace, name=claim.name, apiVersion="v1"
            )
        elif verdict.staleness is Staleness.UNREFERENCED and since is None and verdict.since is not None:
            _mark(ctx, claim.namespace, claim.name, timestamp(verdict.since))
        elif (
            verdict.staleness is Staleness.IN_USE
            and item.get("since") is not None
            and not claim.owner_uids & {user.uid for user in namespace_users}
        ):
            # While its workload exists the mark is the delivery controller's (D100): it marks a
            # claim the workload no longer uses, and removing that mark here would restart its grace.
            _mark(ctx, claim.namespace, claim.name, None)


if __name__ == "__main__":
    hook.run(main, config=config)
