"""The test bed's scheduler and kubelets: gated Pods wait, Pods with unbound claims wait, the rest
are scheduled and reported Running (see testbed.scheduler)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubeemu import errors
from kubeemu.pytest_fixtures import RunningEmulator
from testbed.jobrunner import NODE_NAME
from testbed.mounts import pod_mounts
from testbed.scheduler import GATED_MESSAGE, PodScheduler
from testbed.volumes import SELECTED_NODE_ANNOTATION, StorageClassBehaviour, VolumeProvisioner

NAMESPACE = "default"
GATE = "example.com/wait-for-me"
RUNNER_IMAGE = "registry.example/runner@sha256:" + "a" * 64


@pytest.fixture
def volumes(kube_emulator: RunningEmulator) -> Iterator[VolumeProvisioner]:
    classes = (
        StorageClassBehaviour("shared", default=True),
        StorageClassBehaviour("stuck", never_binds=True),
        StorageClassBehaviour("local", binding_mode="WaitForFirstConsumer"),
    )
    with VolumeProvisioner(kube_emulator, classes=classes) as provisioner:
        yield provisioner


@pytest.fixture
def scheduler(kube_emulator: RunningEmulator, volumes: VolumeProvisioner) -> Iterator[PodScheduler]:
    with PodScheduler(kube_emulator, runs_elsewhere=lambda image: image == RUNNER_IMAGE) as started:
        yield started


def pod(
    name: str,
    *,
    gates: tuple[str, ...] = (),
    claim: str = "",
    sub_path: str = "",
    image: str = "nginx:1.27",
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"containers": [container], **spec},
    }
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if claim:
        body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        mount = {"name": "data", "mountPath": "/data", "readOnly": True}
        if sub_path:
            mount["subPath"] = sub_path
        container["volumeMounts"] = [mount]
    return body


def claim(name: str, storage_class: str, mode: str = "ReadWriteMany") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": [mode],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def scheduled_condition(found: dict[str, Any]) -> dict[str, Any]:
    conditions = [
        c for c in (found.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"
    ]
    return conditions[0] if conditions else {}


def reason_is(reason: str) -> Any:
    return lambda found: scheduled_condition(found).get("reason") == reason


def test_a_pod_without_gates_or_claims_is_scheduled_and_running(
    scheduler: PodScheduler, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(pod("web"))
    running = scheduler.wait_for_pod("web")
    assert running["spec"]["nodeName"] == NODE_NAME
    assert running["status"]["containerStatuses"][0]["ready"] is True
    assert {c["type"]: c["status"] for c in running["status"]["conditions"]}["Ready"] == "True"
    node = scheduler.get("nodes", "", NODE_NAME)
    assert node is not None
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE_NAME


def test_a_gated_pod_stays_pending_until_its_gates_are_removed(
    scheduler: PodScheduler, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(pod("gated", gates=(GATE,)))
    waiting = scheduler.wait_for_pod("gated", check=reason_is("SchedulingGated"))
    assert waiting["status"]["phase"] == "Pending"
    assert scheduled_condition(waiting)["status"] == "False"
    assert scheduled_condition(waiting)["message"] == GATED_MESSAGE
    assert not waiting["spec"].get("nodeName")
    status, _, body = kube_emulator.request(
        "PATCH",
        f"/api/v1/namespaces/{NAMESPACE}/pods/gated",
        body=[{"op": "remove", "path": "/spec/schedulingGates"}],
        content_type="application/json-patch+json",
    )
    assert status == 200, body
    scheduler.wait_for_pod("gated")


def test_a_pod_with_an_unbound_immediate_claim_waits_until_it_is_bound(
    scheduler: PodScheduler, volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("slow", "stuck"))
    kube_emulator.cluster.apply(pod("consumer", claim="slow"))
    waiting = scheduler.wait_for_pod("consumer", check=reason_is("Unschedulable"))
    assert "pod has unbound immediate PersistentVolumeClaims" in scheduled_condition(waiting)["message"]
    assert not waiting["spec"].get("nodeName")
    volumes.fix("stuck")
    scheduler.wait_for_pod("consumer")


def test_a_pod_with_a_missing_claim_names_it(scheduler: PodScheduler, kube_emulator: RunningEmulator) -> None:
    kube_emulator.cluster.apply(pod("lonely", claim="nowhere"))
    waiting = scheduler.wait_for_pod("lonely", check=reason_is("Unschedulable"))
    assert scheduled_condition(waiting)["message"] == 'persistentvolumeclaim "nowhere" not found'
    kube_emulator.cluster.apply(claim("nowhere", "shared"))
    scheduler.wait_for_pod("lonely")


def test_a_wait_for_first_consumer_claim_binds_for_the_pod_that_uses_it(
    scheduler: PodScheduler, volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("node-local", "local", mode="ReadWriteOnce"))
    volumes.wait_for(
        lambda: [e["reason"] for e in volumes.events("node-local")],
        lambda reasons: "WaitForFirstConsumer" in reasons,
        what="the claim to wait for its first consumer",
    )
    assert (volumes.get("persistentvolumeclaims", NAMESPACE, "node-local") or {})["status"][
        "phase"
    ] == "Pending"
    kube_emulator.cluster.apply(pod("first", claim="node-local"))
    running = scheduler.wait_for_pod("first")
    bound = volumes.wait_for_claim("node-local")
    assert bound["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == running["spec"]["nodeName"]


def test_pod_mounts_name_the_directory_of_the_claim_subpath(
    scheduler: PodScheduler, volumes: VolumeProvisioner, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(claim("models", "shared"))
    kube_emulator.cluster.apply(pod("reader", claim="models", sub_path="objects/sha256-abc"))
    running = scheduler.wait_for_pod("reader")
    (mount,) = pod_mounts(kube_emulator.cluster, running)
    expected = volumes.volume_directory("models") / "objects/sha256-abc"
    assert (mount.container, mount.mount_path, mount.claim) == ("main", "/data", "models")
    assert (mount.sub_path, mount.read_only, mount.host_path) == ("objects/sha256-abc", True, expected)
    assert expected.is_dir()  # the kubelet creates a missing subPath directory when it starts the Pod


def test_node_selector_places_the_pod_and_no_fitting_node_keeps_it_pending(
    scheduler: PodScheduler, kube_emulator: RunningEmulator
) -> None:
    scheduler.add_node("gpu-1", {"example.com/gpu": "true"})
    kube_emulator.cluster.apply(pod("trainer", nodeSelector={"example.com/gpu": "true"}))
    assert scheduler.wait_for_pod("trainer")["spec"]["nodeName"] == "gpu-1"
    kube_emulator.cluster.apply(pod("picky", nodeSelector={"example.com/tpu": "true"}))
    waiting = scheduler.wait_for_pod("picky", check=reason_is("Unschedulable"))
    assert "didn't match Pod's node affinity/selector" in scheduled_condition(waiting)["message"]
    scheduler.add_node("tpu-1", {"example.com/tpu": "true"})
    assert scheduler.wait_for_pod("picky")["spec"]["nodeName"] == "tpu-1"


def test_a_pod_of_the_runner_image_is_scheduled_but_never_started(
    scheduler: PodScheduler, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(pod("module", image=RUNNER_IMAGE))
    kube_emulator.cluster.apply(pod("other"))
    scheduled = scheduler.wait_for_pod("module", check=lambda found: bool(found["spec"].get("nodeName")))
    scheduler.wait_for_pod("other")  # handled after the first: the kubelet has seen "module" by now
    current = scheduler.get("pods", NAMESPACE, "module") or {}
    assert current["status"]["phase"] == "Pending"
    assert "containerStatuses" not in current["status"]
    assert scheduled["spec"]["nodeName"] == NODE_NAME


def test_the_apiserver_refuses_new_scheduling_gates_on_an_existing_pod(
    scheduler: PodScheduler, kube_emulator: RunningEmulator
) -> None:
    kube_emulator.cluster.apply(pod("open"))
    scheduler.wait_for_pod("open")
    current = scheduler.get("pods", NAMESPACE, "open") or {}
    current["spec"]["schedulingGates"] = [{"name": GATE}]
    with pytest.raises(errors.APIError) as refused:
        kube_emulator.cluster.update(scheduler.rtype("pods"), current, namespace=NAMESPACE, name="open")
    assert refused.value.code == 422
    assert "only deletion is allowed, but found new scheduling gate" in str(refused.value.message)
    placed = pod("placed", gates=(GATE,), nodeName=NODE_NAME)
    with pytest.raises(errors.APIError) as bypassing:
        kube_emulator.cluster.apply(placed)
    assert "cannot be set until all schedulingGates have been cleared" in str(bypassing.value.message)
