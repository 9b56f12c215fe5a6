"""The test bed's PV controller and provisioners: claims bind, wait, fail or are lost per StorageClass
as the test configures them (see testbed.volumes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubeemu.pytest_fixtures import RunningEmulator
from testbed.volumes import (
    DEFAULT_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    StorageClassBehaviour,
    VolumeProvisioner,
)

NAMESPACE = "default"
RWX_REFUSED = "rpc error: code = InvalidArgument desc = ReadWriteMany is not supported by this driver"
QUOTA_EXCEEDED = "rpc error: code = ResourceExhausted desc = quota exceeded for the backing pool"
CLASSES = (
    StorageClassBehaviour("shared", default=True),
    StorageClassBehaviour("block", read_write_many=False, unsupported_access_mode_message=RWX_REFUSED),
    StorageClassBehaviour("broken", failure=QUOTA_EXCEEDED),
    StorageClassBehaviour("stuck", never_binds=True),
    StorageClassBehaviour("local", binding_mode="WaitForFirstConsumer"),
    StorageClassBehaviour("kept", reclaim_policy="Retain"),
)


@pytest.fixture
def volumes(kube_emulator: RunningEmulator) -> Iterator[VolumeProvisioner]:
    with VolumeProvisioner(kube_emulator, classes=CLASSES) as provisioner:
        yield provisioner


def claim(
    name: str, storage_class: str | None, *, modes: tuple[str, ...] = ("ReadWriteMany",), size: str = "2Gi"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def events_of(volumes: VolumeProvisioner, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in volumes.events(name) if e["reason"] == reason]


def wait_for_event(volumes: VolumeProvisioner, name: str, reason: str) -> dict[str, Any]:
    found = volumes.wait_for(
        lambda: events_of(volumes, name, reason), bool, what=f"a {reason} Event for claim {name}"
    )
    return found[0]


def test_configured_classes_exist_as_storage_classes(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    shared = volumes.get("storageclasses", "", "shared")
    local = volumes.get("storageclasses", "", "local")
    assert shared is not None
    assert local is not None
    assert shared["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert (shared["provisioner"], shared["volumeBindingMode"]) == (DEFAULT_PROVISIONER, "Immediate")
    assert local["volumeBindingMode"] == "WaitForFirstConsumer"
    listed = kube_emulator.kubectl("get", "storageclasses", "-o", "name").stdout.split()
    assert "storageclass.storage.k8s.io/shared" in listed


def test_an_immediate_class_binds_the_claim_to_a_fresh_directory(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    created = kube_emulator.cluster.apply(claim("data", "shared"))
    bound = volumes.wait_for_claim("data")
    volume = volumes.get("persistentvolumes", "", bound["spec"]["volumeName"])
    assert volume is not None
    directory = volumes.volume_directory("data")
    assert directory.is_dir()
    assert list(directory.iterdir()) == []
    assert directory.parent == volumes.workdir
    assert volume["metadata"]["name"] == f"pvc-{created['metadata']['uid']}"
    assert volume["spec"]["hostPath"]["path"] == str(directory)
    assert volume["spec"]["claimRef"]["uid"] == created["metadata"]["uid"]
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["capacity"] == {"storage": "2Gi"}
    assert volume["status"]["phase"] == "Bound"
    assert bound["status"] == {
        "phase": "Bound",
        "accessModes": ["ReadWriteMany"],
        "capacity": {"storage": "2Gi"},
    }
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    reasons = [e["reason"] for e in volumes.events("data")]
    assert reasons == ["Provisioning", "ProvisioningSucceeded"]


def test_a_claim_without_a_class_gets_the_default_class(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("plain", None))
    bound = volumes.wait_for_claim("plain")
    assert bound["spec"]["storageClassName"] == "shared"


def test_read_write_many_on_a_class_without_it_fails_with_the_configured_message(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    created = kube_emulator.cluster.apply(claim("wide", "block"))
    event = wait_for_event(volumes, "wide", "ProvisioningFailed")
    assert event["type"] == "Warning"
    assert event["message"] == RWX_REFUSED
    assert event["involvedObject"]["uid"] == created["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "PersistentVolumeClaim"
    assert event["source"]["component"].startswith(f"{DEFAULT_PROVISIONER}_csi-provisioner-")
    assert (volumes.get("persistentvolumeclaims", NAMESPACE, "wide") or {})["status"]["phase"] == "Pending"
    kube_emulator.cluster.apply(claim("narrow", "block", modes=("ReadWriteOnce",)))
    volumes.wait_for_claim("narrow")


def test_a_failing_class_reports_provisioning_failed_and_binds_once_fixed(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("quota", "broken"))
    event = wait_for_event(volumes, "quota", "ProvisioningFailed")
    assert event["message"] == QUOTA_EXCEEDED
    # The same failure again (any change of the claim brings it back) writes no second Event.
    touched = claim("quota", "broken")
    touched["metadata"]["labels"] = {"touched": "yes"}
    kube_emulator.cluster.apply(touched)
    volumes.fix("broken")
    volumes.wait_for_claim("quota")
    assert len(events_of(volumes, "quota", "ProvisioningFailed")) == 1


def test_a_never_binding_class_leaves_the_claim_pending(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("forever", "stuck"))
    wait_for_event(volumes, "forever", "Provisioning")
    # A claim made later binds: the provisioner has long been past the first one.
    kube_emulator.cluster.apply(claim("later", "shared"))
    later = volumes.wait_for_claim("later")
    assert (volumes.get("persistentvolumeclaims", NAMESPACE, "forever") or {})["status"] == {
        "phase": "Pending"
    }
    assert [v["metadata"]["name"] for v in volumes.items("persistentvolumes")] == [
        later["spec"]["volumeName"]
    ]


def test_a_missing_class_is_reported_by_the_pv_controller(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("orphan", "nonexistent"))
    event = wait_for_event(volumes, "orphan", "ProvisioningFailed")
    assert event["message"] == 'storageclass.storage.k8s.io "nonexistent" not found'
    assert event["source"]["component"] == "persistentvolume-controller"
    volumes.configure(StorageClassBehaviour("nonexistent"))
    volumes.wait_for_claim("orphan")


def test_wait_for_first_consumer_binds_only_once_a_node_is_selected(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("late", "local", modes=("ReadWriteOnce",)))
    event = wait_for_event(volumes, "late", "WaitForFirstConsumer")
    assert event["type"] == "Normal"
    assert (volumes.get("persistentvolumeclaims", NAMESPACE, "late") or {})["status"]["phase"] == "Pending"
    selected = claim("late", "local", modes=("ReadWriteOnce",))
    selected["metadata"]["annotations"] = {SELECTED_NODE_ANNOTATION: "kubeemu-node"}
    kube_emulator.cluster.apply(selected)
    volumes.wait_for_claim("late")


def test_deleting_the_volume_makes_its_claim_lost(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("fragile", "shared"))
    bound = volumes.wait_for_claim("fragile")
    kube_emulator.kubectl("delete", "pv", bound["spec"]["volumeName"])
    volumes.wait_for_claim("fragile", phase="Lost")
    assert wait_for_event(volumes, "fragile", "ClaimLost")["type"] == "Warning"


def test_deleting_the_claim_deletes_its_volume_and_directory_unless_retained(
    volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("brief", "shared"))
    kube_emulator.cluster.apply(claim("kept", "kept"))
    volumes.wait_for_claim("brief")
    kept_volume = volumes.wait_for_claim("kept")["spec"]["volumeName"]
    directory = volumes.volume_directory("brief")
    kube_emulator.kubectl("delete", "pvc", "brief", "kept")
    volumes.wait_for(
        lambda: [v["metadata"]["name"] for v in volumes.items("persistentvolumes")],
        lambda names: names == [kept_volume],
        what="the deleted claim's volume to go and the retained one to stay",
    )
    assert not directory.exists()
    volumes.wait_for(
        lambda: volumes.get("persistentvolumes", "", kept_volume) or {},
        lambda volume: volume.get("status", {}).get("phase") == "Released",
        what="the retained volume to be Released",
    )
