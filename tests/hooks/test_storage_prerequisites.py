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
SHARED_PVC = "ai.deckhouse.io/shared-pvc"
OWNER_UID = "ai.deckhouse.io/owner-uid"


def sc(name: str, *, default: bool = False, mode: str = "Immediate") -> dict[str, Any]:
    return {"name": name, "volumeBindingMode": mode, "isDefault": default}


def claim(
    name: str,
    phase: str | None,
    storage_class: str = "nfs",
    namespace: str = "team-a",
    *,
    labels: dict[str, str] | None = None,
    owners: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A claim as the hook's jqFilter leaves it; by default one the module made (its workload `w-<name>`
    owns it and is named in the owner-UID label)."""
    made = {SHARED_PVC: "true", "module": "ai-models", OWNER_UID: f"w-{name}"}
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"pvc-{name}",
            "labels": made if labels is None else labels,
            "ownerReferences": [{"uid": uid} for uid in ([f"w-{name}"] if owners is None else owners)],
            "deletionTimestamp": None,
        },
        "spec": {"storageClassName": storage_class},
        "status": {"phase": phase},
    }


# Claims labelled shared that the module did not make: by hand, with the module's labels copied but
# no owner, or with an owner-UID label that names none of its owners.
FOREIGN_CLAIMS: dict[str, dict[str, Any]] = {
    "shared label only": {"labels": {SHARED_PVC: "true"}, "owners": ()},
    "module labels, no owner": {
        "labels": {SHARED_PVC: "true", "module": "ai-models", OWNER_UID: "w-1"},
        "owners": (),
    },
    "owner-UID label of another owner": {
        "labels": {SHARED_PVC: "true", "module": "ai-models", OWNER_UID: "w-1"},
        "owners": ("w-2",),
    },
    "owned, no module label": {"labels": {SHARED_PVC: "true", OWNER_UID: "w-1"}, "owners": ("w-1",)},
}


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


@pytest.mark.parametrize("foreign", FOREIGN_CLAIMS.values(), ids=FOREIGN_CLAIMS.keys())
def test_lost_claim_the_module_did_not_make_changes_nothing(kit: Any, foreign: dict[str, Any]) -> None:
    values = module_values()
    lost = claim("theirs", "Lost", **foreign)
    snaps = snapshots(kit, [sc("nfs", default=True)], [lost, claim("m-2", "Pending")])
    output = run(kit, [kit.event(CLAIMS, "Modified", lost, snaps)], values)
    result = verdict(kit, values, output)
    assert (result["satisfied"], result["reason"]) == (True, "ReadWriteManyUnconfirmed")
    assert "theirs" not in result["message"]
    assert output.metrics.data == [metric(1.0, "SharedPVC", "ReadWriteManyUnconfirmed")]


@pytest.mark.parametrize("foreign", FOREIGN_CLAIMS.values(), ids=FOREIGN_CLAIMS.keys())
def test_bound_claim_the_module_did_not_make_confirms_nothing(kit: Any, foreign: dict[str, Any]) -> None:
    values = module_values()
    snaps = snapshots(kit, [sc("nfs", default=True)], [claim("theirs", "Bound", **foreign)])
    output = run(kit, [kit.before_helm(snaps)], values)
    assert verdict(kit, values, output)["reason"] == "ReadWriteManyUnconfirmed"


def test_a_foreign_lost_claim_beside_the_modules_lost_one_still_fails(kit: Any) -> None:
    values = module_values()
    foreign = claim("theirs", "Lost", **FOREIGN_CLAIMS["shared label only"])
    snaps = snapshots(kit, [sc("nfs", default=True)], [foreign, claim("m-1", "Lost")])
    result = verdict(kit, values, run(kit, [kit.before_helm(snaps)], values))
    assert (result["satisfied"], result["reason"]) == (False, "ReadWriteManyFailed")
    assert "team-a/m-1" in result["message"]
    assert "theirs" not in result["message"]


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
