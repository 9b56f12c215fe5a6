"""stale_claims: shared claims that no workload of their namespace references are deleted."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from deckhouse import hook

from support.values import module_values

KINDS = ["deployments", "statefulsets", "daemonsets", "jobs", "cronjobs", "pods"]
OLD = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim(
    name: str, namespace: str = "team-a", created: str = OLD, *, deleting: bool = False
) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "created": created, "deleting": deleting}


def workload(namespace: str, *claims: str) -> dict[str, Any]:
    return {"namespace": namespace, "claims": list(claims)}


def snapshots(kit: Any, claims: list[dict[str, Any]], **workloads: list[dict[str, Any]]) -> dict[str, Any]:
    result = {"shared_claims": kit.snapshot(*claims)}
    for kind in KINDS:
        result[kind] = kit.snapshot(*workloads.get(kind, []))
    return result


def deletion(name: str, namespace: str = "team-a") -> dict[str, Any]:
    return {
        "operation": "Delete",
        "kind": "PersistentVolumeClaim",
        "namespace": namespace,
        "name": name,
        "apiVersion": "v1",
    }


def run(kit: Any, snaps: dict[str, Any]) -> Any:
    return hook.testrun(
        kit.load("stale_claims").main,
        binding_context=[kit.schedule("stale_claims", snaps)],
        initial_values=module_values(),
    )


def test_unreferenced_claim_is_deleted_and_referenced_ones_survive(kit: Any) -> None:
    # A paused Deployment scaled to zero still references its bound claim: the filter reads the pod
    # template, which pause and replicas do not change.
    snaps = snapshots(
        kit,
        [claim("paused-model"), claim("orphan"), claim("cron-model"), claim("pod-model")],
        deployments=[workload("team-a", "paused-model")],
        cronjobs=[workload("team-a", "cron-model")],
        pods=[workload("team-a", "pod-model", "scratch")],
    )
    output = run(kit, snaps)
    assert kit.kube(output) == [deletion("orphan")]
    assert output.values_patches.data == []


@pytest.mark.parametrize("kind", KINDS)
def test_each_workload_kind_keeps_its_claim(kit: Any, kind: str) -> None:
    output = run(kit, snapshots(kit, [claim("model")], **{kind: [workload("team-a", "model")]}))
    assert kit.kube(output) == []


def test_reference_from_another_namespace_does_not_count(kit: Any) -> None:
    snaps = snapshots(
        kit, [claim("model", "team-a"), claim("model", "team-b")], statefulsets=[workload("team-b", "model")]
    )
    assert kit.kube(run(kit, snaps)) == [deletion("model", "team-a")]


def test_young_and_deleting_claims_are_left_alone(kit: Any) -> None:
    young = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    snaps = snapshots(kit, [claim("fresh", created=young), claim("going", deleting=True), claim("old")])
    assert kit.kube(run(kit, snaps)) == [deletion("old")]


def test_no_claims_no_operations(kit: Any) -> None:
    snaps = snapshots(kit, [], deployments=[workload("team-a", "model")], pods=[workload("team-a")])
    assert kit.kube(run(kit, snaps)) == []
