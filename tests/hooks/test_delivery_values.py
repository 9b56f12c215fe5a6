"""delivery_values: the SharedPVC StorageClass chain into aiModels.internal.delivery."""

from __future__ import annotations

from typing import Any

from deckhouse import hook

from support.values import MINIMAL_SETTINGS, module_values

BINDING = "storage_classes"
PATH = "/aiModels/internal/delivery"


def sc(name: str, *, default: bool = False, mode: str = "Immediate") -> dict[str, Any]:
    return {"name": name, "volumeBindingMode": mode, "isDefault": default}


def settings(**delivery: Any) -> dict[str, Any]:
    return {**MINIMAL_SETTINGS, "delivery": delivery}


def run(kit: Any, contexts: list[dict[str, Any]], values: dict[str, Any]) -> Any:
    return hook.testrun(kit.load("delivery_values").main, binding_context=contexts, initial_values=values)


def test_synchronization_picks_the_single_default_class(kit: Any) -> None:
    snapshots = {BINDING: kit.snapshot(sc("local"), sc("nfs", default=True))}
    values = module_values()
    output = run(kit, [kit.synchronization(BINDING, snapshots)], values)
    assert output.values_patches.data == [
        {"op": "add", "path": f"{PATH}/sharedPVCStorageClassName", "value": "nfs"},
        {"op": "add", "path": f"{PATH}/storageClassSource", "value": "DefaultStorageClass"},
    ]
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "sharedPVCStorageClassName": "nfs",
        "storageClassSource": "DefaultStorageClass",
    }


def test_module_setting_wins_over_global_and_default(kit: Any) -> None:
    snapshots = {BINDING: kit.snapshot(sc("ceph-rwx"), sc("nfs", default=True), sc("global"))}
    values = module_values(
        settings(sharedPVCStorageClassName="ceph-rwx"),
        global_overrides={"defaultClusterStorageClass": "global"},
    )
    output = run(kit, [kit.before_helm(snapshots)], values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "sharedPVCStorageClassName": "ceph-rwx",
        "storageClassSource": "ModuleSetting",
    }


def test_global_storage_class_wins_over_default(kit: Any) -> None:
    snapshots = {BINDING: kit.snapshot(sc("nfs", default=True), sc("global"))}
    values = module_values(global_overrides={"defaultClusterStorageClass": "global"})
    output = run(kit, [kit.before_helm(snapshots)], values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "sharedPVCStorageClassName": "global",
        "storageClassSource": "GlobalStorageClass",
    }


def test_setting_naming_a_missing_class_is_kept(kit: Any) -> None:
    # The verdict (storage_prerequisites) reports StorageClassNotFound; the chain does not fall through.
    values = module_values(settings(sharedPVCStorageClassName="gone"))
    output = run(kit, [kit.before_helm({BINDING: kit.snapshot(sc("nfs", default=True))})], values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "sharedPVCStorageClassName": "gone",
        "storageClassSource": "ModuleSetting",
    }


def test_several_defaults_resolve_nothing_and_unset_a_previous_class(kit: Any) -> None:
    values = module_values(
        internal={
            "delivery": {"sharedPVCStorageClassName": "nfs", "storageClassSource": "DefaultStorageClass"}
        }
    )
    snapshots = {BINDING: kit.snapshot(sc("nfs", default=True), sc("ceph", default=True))}
    added = sc("ceph", default=True)
    output = run(kit, [kit.event(BINDING, "Added", added, snapshots)], values)
    assert output.values_patches.data == [
        {"op": "add", "path": f"{PATH}/storageClassSource", "value": "NotFound"},
        {"op": "remove", "path": f"{PATH}/sharedPVCStorageClassName"},
    ]
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "storageClassSource": "NotFound"
    }


def test_no_classes_at_all(kit: Any) -> None:
    values = module_values()
    output = run(kit, [kit.synchronization(BINDING, {BINDING: []})], values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "storageClassSource": "NotFound"
    }


def test_unchanged_resolution_writes_no_patch(kit: Any) -> None:
    values = module_values(
        internal={
            "delivery": {"sharedPVCStorageClassName": "nfs", "storageClassSource": "DefaultStorageClass"}
        }
    )
    snapshots = {BINDING: kit.snapshot(sc("nfs", default=True))}
    modified = sc("nfs", default=True)
    output = run(kit, [kit.event(BINDING, "Modified", modified, snapshots)], values)
    assert output.values_patches.data == []


def test_before_helm_run_with_several_contexts_ends_on_the_last_state(kit: Any) -> None:
    values = module_values()
    first = {BINDING: kit.snapshot(sc("nfs", default=True))}
    # The default annotation moves from nfs to ceph: Modified, then Added, then beforeHelm.
    second = {BINDING: kit.snapshot(sc("nfs"))}
    third = {BINDING: kit.snapshot(sc("nfs"), sc("ceph", default=True))}
    contexts = [
        kit.synchronization(BINDING, first),
        kit.event(BINDING, "Modified", sc("nfs"), second),
        kit.event(BINDING, "Added", sc("ceph", default=True), third),
        kit.before_helm(third),
    ]
    output = run(kit, contexts, values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "sharedPVCStorageClassName": "ceph",
        "storageClassSource": "DefaultStorageClass",
    }


def test_deleted_default_class_unsets_the_name(kit: Any) -> None:
    values = module_values(
        internal={
            "delivery": {"sharedPVCStorageClassName": "nfs", "storageClassSource": "DefaultStorageClass"}
        }
    )
    output = run(kit, [kit.event(BINDING, "Deleted", sc("nfs", default=True), {BINDING: []})], values)
    assert kit.patched(values, output)["aiModels"]["internal"]["delivery"] == {
        "storageClassSource": "NotFound"
    }
