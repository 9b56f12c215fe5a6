"""storage_prerequisites: the evaluator's verdict into values and the grouped metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from deckhouse import hook

from support.values import MINIMAL_SETTINGS, module_values

SC, CLAIMS, NODES = "storage_classes", "shared_claims", "nodes"
METRIC = "d8_ai_models_storage_prerequisites_satisfied"
GROUP = "d8_ai_models_storage_prerequisites"


def sc(name: str, *, default: bool = False, mode: str = "Immediate") -> dict[str, Any]:
    return {"name": name, "volumeBindingMode": mode, "isDefault": default}


def claim(
    name: str, phase: str | None, storage_class: str = "nfs", namespace: str = "team-a"
) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "storageClassName": storage_class, "phase": phase}


def snapshots(
    kit: Any,
    classes: Sequence[dict[str, Any]],
    claims: Sequence[dict[str, Any]] = (),
    nodes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    return {SC: kit.snapshot(*classes), CLAIMS: kit.snapshot(*claims), NODES: kit.snapshot(*nodes)}


def run(kit: Any, contexts: list[dict[str, Any]], values: dict[str, Any]) -> Any:
    return hook.testrun(
        kit.load("storage_prerequisites").main, binding_context=contexts, initial_values=values
    )


def verdict(kit: Any, values: dict[str, Any], output: Any) -> dict[str, Any]:
    result: dict[str, Any] = kit.patched(values, output)["aiModels"]["internal"]["storagePrerequisites"]
    return result


def metric(value: float, mode: str, reason: str) -> dict[str, Any]:
    return {
        "name": METRIC,
        "group": GROUP,
        "action": "set",
        "value": value,
        "labels": {"mode": mode, "reason": reason},
    }


def test_synchronization_with_a_bound_claim_is_satisfied(kit: Any) -> None:
    values = module_values()
    snaps = snapshots(kit, [sc("nfs", default=True)], [claim("m-1", "Bound"), claim("m-2", "Pending")])
    output = run(kit, [kit.synchronization(CLAIMS, snaps)], values)
    result = verdict(kit, values, output)
    assert result["mode"] == "SharedPVC"
    assert result["satisfied"] is True
    assert result["reason"] == "Satisfied"
    assert "nfs" in result["message"]
    assert output.metrics.data == [metric(1.0, "SharedPVC", "Satisfied")]


def test_no_claim_yet_is_unconfirmed_but_satisfied(kit: Any) -> None:
    values = module_values()
    output = run(kit, [kit.before_helm(snapshots(kit, [sc("nfs", default=True)]))], values)
    assert verdict(kit, values, output)["reason"] == "ReadWriteManyUnconfirmed"
    assert output.metrics.data == [metric(1.0, "SharedPVC", "ReadWriteManyUnconfirmed")]


def test_lost_claim_fails_read_write_many(kit: Any) -> None:
    values = module_values()
    snaps = snapshots(kit, [sc("nfs", default=True)], [claim("m-1", "Lost")])
    output = run(kit, [kit.event(CLAIMS, "Modified", claim("m-1", "Lost"), snaps)], values)
    result = verdict(kit, values, output)
    assert result["satisfied"] is False
    assert result["reason"] == "ReadWriteManyFailed"
    assert "team-a/m-1" in result["message"]
    assert output.metrics.data == [metric(0.0, "SharedPVC", "ReadWriteManyFailed")]


def test_pending_claim_is_not_a_failure_without_events(kit: Any) -> None:
    # ProvisioningFailed Events are not watched by the hook: the controller's collector decides those.
    values = module_values()
    snaps = snapshots(kit, [sc("nfs", default=True)], [claim("m-1", "Pending"), claim("m-2", None)])
    output = run(kit, [kit.event(CLAIMS, "Added", claim("m-2", None), snaps)], values)
    assert verdict(kit, values, output)["reason"] == "ReadWriteManyUnconfirmed"


def test_claims_of_another_class_do_not_count(kit: Any) -> None:
    values = module_values()
    snaps = snapshots(
        kit, [sc("nfs", default=True), sc("ceph")], [claim("m-1", "Bound", storage_class="ceph")]
    )
    output = run(kit, [kit.before_helm(snaps)], values)
    assert verdict(kit, values, output)["reason"] == "ReadWriteManyUnconfirmed"


@pytest.mark.parametrize(
    ("classes", "settings", "global_overrides", "reason"),
    [
        ([sc("local")], {}, {}, "NoDefaultStorageClass"),
        ([sc("a", default=True), sc("b", default=True)], {}, {}, "SeveralDefaultStorageClasses"),
        ([sc("nfs", default=True)], {"sharedPVCStorageClassName": "gone"}, {}, "StorageClassNotFound"),
        ([sc("nfs", default=True)], {}, {"defaultClusterStorageClass": "gone"}, "StorageClassNotFound"),
        ([sc("nfs", default=True, mode="WaitForFirstConsumer")], {}, {}, "StorageClassWaitForFirstConsumer"),
    ],
)
def test_unsatisfied_shared_pvc_reasons(
    kit: Any,
    classes: list[dict[str, Any]],
    settings: dict[str, Any],
    global_overrides: dict[str, Any],
    reason: str,
) -> None:
    values = module_values({**MINIMAL_SETTINGS, "delivery": settings}, global_overrides=global_overrides)
    output = run(kit, [kit.synchronization(SC, snapshots(kit, classes))], values)
    result = verdict(kit, values, output)
    assert (result["satisfied"], result["reason"]) == (False, reason)
    assert output.metrics.data == [metric(0.0, "SharedPVC", reason)]


def node_cache_values(**node_cache: Any) -> dict[str, Any]:
    return module_values({**MINIMAL_SETTINGS, "delivery": {"mode": "NodeCache", "nodeCache": node_cache}})


def test_node_cache_counts_matching_nodes_and_ignores_storage(kit: Any) -> None:
    values = node_cache_values(nodeSelector={"node.deckhouse.io/group": "gpu"})
    nodes = [
        {"labels": {"node.deckhouse.io/group": "gpu", "kubernetes.io/hostname": "gpu-1"}},
        {"labels": {"node.deckhouse.io/group": "gpu", "kubernetes.io/hostname": "gpu-2"}},
        {"labels": {"node.deckhouse.io/group": "system"}},
    ]
    # No StorageClass at all: irrelevant in NodeCache mode.
    snaps = snapshots(kit, [], [claim("m-1", "Lost")], nodes)
    output = run(kit, [kit.synchronization(NODES, snaps)], values)
    result = verdict(kit, values, output)
    assert result == {
        "mode": "NodeCache",
        "satisfied": True,
        "reason": "Satisfied",
        "message": result["message"],
    }
    assert result["message"].startswith("2 node(s)")
    assert output.metrics.data == [metric(1.0, "NodeCache", "Satisfied")]


def test_node_cache_default_selector_matching_no_node(kit: Any) -> None:
    values = node_cache_values()
    snaps = snapshots(kit, [sc("nfs", default=True)], [], [{"labels": {"kubernetes.io/hostname": "n1"}}])
    output = run(
        kit, [kit.event(NODES, "Modified", {"labels": {"kubernetes.io/hostname": "n1"}}, snaps)], values
    )
    result = verdict(kit, values, output)
    assert (result["satisfied"], result["reason"]) == (False, "NodeCacheSelectsNoNode")
    assert "ai.deckhouse.io/model-cache=true" in result["message"]


def test_node_labelled_later_clears_the_verdict_in_one_run(kit: Any) -> None:
    values = node_cache_values()
    before = snapshots(kit, [], [], [{"labels": {}}])
    labelled = {"labels": {"ai.deckhouse.io/model-cache": "true"}}
    after = snapshots(kit, [], [], [labelled])
    contexts = [
        kit.synchronization(NODES, before),
        kit.event(NODES, "Modified", labelled, after),
        kit.before_helm(after),
    ]
    output = run(kit, contexts, values)
    assert verdict(kit, values, output)["reason"] == "Satisfied"
    # Every run emits the group's whole set; the last context's series is what the group holds.
    assert output.metrics.data[-1] == metric(1.0, "NodeCache", "Satisfied")
    assert {item["group"] for item in output.metrics.data} == {GROUP}


def test_same_verdict_writes_no_values_patch(kit: Any) -> None:
    values = module_values()
    first = run(kit, [kit.before_helm(snapshots(kit, [sc("nfs", default=True)]))], values)
    current = kit.patched(values, first)
    second = run(kit, [kit.before_helm(snapshots(kit, [sc("nfs", default=True)]))], current)
    assert second.values_patches.data == []
    assert second.metrics.data == first.metrics.data
