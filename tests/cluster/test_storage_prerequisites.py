"""The storage-prerequisites verdict of real controller replicas: logged at start, before either
holds the lease, and exported on every scrape so fixing the cluster clears it without a restart."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from ai_models.domain.delivery.claims import Artifact, claim_manifest
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.names import SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE
from cluster.catalog_stack import CatalogStack, stack_fixture
from fakes.hub import FakeHub
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import InstalledModule, install_module
from testbed.volumes import StorageClassBehaviour, VolumeProvisioner

client: Any = typed_client
METRIC = "d8_ai_models_storage_prerequisites_satisfied"


@pytest.fixture
def stack(kube_emulator: RunningEmulator, fake_hub: FakeHub, tmp_path: Path) -> Iterator[CatalogStack]:
    module: InstalledModule = install_module(kube_emulator)
    yield from stack_fixture(module, fake_hub, tmp_path)


def storage_class(name: str, *, binding: str, default: bool) -> dict[str, Any]:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": "example.com/csi",
        "volumeBindingMode": binding,
    }


WORKLOAD = Workload(WorkloadKind.DEPLOYMENT, "default", "web", uid="0d9e7c1a-3f4b-4c55-9a0e-5c3d2b1a0f9e")


def module_claim(*, name: str, storage_class: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A shared claim as the delivery controller makes it (module labels, owner uid and reference);
    `labels` instead of the module's: a claim someone else labelled."""
    manifest = claim_manifest(
        workload=WORKLOAD, artifacts=[Artifact("sha256:" + "a" * 64, 1024)], storage_class=storage_class
    )
    manifest["metadata"]["name"] = name
    if labels is not None:
        manifest["metadata"]["labels"] = labels
        del manifest["metadata"]["ownerReferences"]
    return manifest


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    return text


def test_both_replicas_log_the_verdict_before_the_lease_and_the_metric_follows_the_fix(
    stack: CatalogStack,
) -> None:
    stack.emulator.cluster.apply(storage_class("local-path", binding="WaitForFirstConsumer", default=True))
    replicas = [stack.controller(replica) for replica in ("replica-a", "replica-b")]
    for replica in replicas:
        replica.wait_for_log("StorageClassWaitForFirstConsumer")
        replica.wait_for_log("waiting for the lease")
        log = replica.log()
        verdict_at = log.index("storage prerequisites NOT satisfied")
        assert verdict_at < log.index("waiting for the lease")
        if "acquired the lease" in log:
            assert verdict_at < log.index("acquired the lease")
    port = replicas[0].metrics_port()
    stack.eventually(
        lambda: f'{METRIC}{{mode="SharedPVC",reason="StorageClassWaitForFirstConsumer"}} 0.0' in scrape(port),
        what="the failing verdict on a scrape",
    )
    # The admin fixes the cluster: the WaitForFirstConsumer class stops being the default and an
    # Immediate one takes its place. The next scrape says so; nothing restarts.
    stack.emulator.cluster.apply(storage_class("local-path", binding="WaitForFirstConsumer", default=False))
    stack.emulator.cluster.apply(storage_class("ceph-rwx", binding="Immediate", default=True))
    assert f'{METRIC}{{mode="SharedPVC",reason="ReadWriteManyUnconfirmed"}} 1.0' in scrape(port)
    assert all(replica.running() for replica in replicas)


def test_only_a_provisioning_failure_about_the_claim_itself_refutes_read_write_many(
    kube_emulator: RunningEmulator,
) -> None:
    from ai_models.controller.prerequisites import check  # noqa: PLC0415
    from ai_models.controller.settings import ControllerSettings  # noqa: PLC0415

    cluster = kube_emulator.cluster
    cluster.apply(storage_class("ceph-rwx", binding="Immediate", default=True))
    made = module_claim(name="shared-llama", storage_class="ceph-rwx")
    claim = cluster.apply({**made, "status": {"phase": "Pending"}})

    def event(name: str, uid: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {
                "kind": "PersistentVolumeClaim",
                "namespace": "default",
                "name": "shared-llama",
                "uid": uid,
            },
            "reason": "ProvisioningFailed",
            "message": "provisioner does not support ReadWriteMany",
            "type": "Warning",
        }

    api = kube_emulator.api_client()
    settings = ControllerSettings()
    # A namespace user can create Events naming the claim; without its uid they do not count.
    cluster.apply(event("forged", "00000000-0000-0000-0000-000000000000"))
    assert str(check(api, settings).reason) == "ReadWriteManyUnconfirmed"
    cluster.apply(event("real", claim["metadata"]["uid"]))
    verdict = check(api, settings)
    assert str(verdict.reason) == "ReadWriteManyFailed"
    assert "default/shared-llama" in verdict.message


def sample(reason: str, value: float) -> str:
    return f'{METRIC}{{mode="SharedPVC",reason="{reason}"}} {value}'


def test_the_first_module_claim_confirms_or_refutes_read_write_many_on_the_metric(
    stack: CatalogStack, tmp_path: Path
) -> None:
    cluster = stack.emulator.cluster
    without_rwx = StorageClassBehaviour(name="rbd", default=True, read_write_many=False)
    with VolumeProvisioner(stack.emulator, classes=[without_rwx], workdir=tmp_path / "volumes") as volumes:
        replica = stack.controller("replica-a")
        port = replica.metrics_port()
        # No shared claim yet: the class is usable, ReadWriteMany is not claimed to work.
        stack.eventually(
            lambda: sample("ReadWriteManyUnconfirmed", 1.0) in scrape(port),
            what="unconfirmed before any claim",
        )

        def refused(name: str) -> bool:
            code, _, body = stack.emulator.request("GET", "/api/v1/namespaces/default/events")
            assert code == 200, body
            return any(
                event.get("reason") == "ProvisioningFailed"
                and (event.get("involvedObject") or {}).get("name") == name
                and "ReadWriteMany" in str(event.get("message"))
                for event in body.get("items") or []
            )

        # A claim someone else labelled is refused for its access mode: it does not count.
        foreign = {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}
        cluster.apply(module_claim(name="someone-elses", storage_class="rbd", labels=foreign))
        stack.eventually(lambda: refused("someone-elses"), what="the foreign claim refused")
        assert sample("ReadWriteManyUnconfirmed", 1.0) in scrape(port)

        # The module's first claim is refused for its access mode: the verdict turns false.
        cluster.apply(module_claim(name="ai-models-web-0123456789", storage_class="rbd"))
        stack.eventually(lambda: refused("ai-models-web-0123456789"), what="the module's claim refused")
        stack.eventually(
            lambda: sample("ReadWriteManyFailed", 0.0) in scrape(port), what="refuted by the module's claim"
        )

        # The provisioner learns ReadWriteMany: the claim binds and confirms it, nothing restarts.
        volumes.configure(StorageClassBehaviour(name="rbd", default=True))
        stack.eventually(
            lambda: sample("Satisfied", 1.0) in scrape(port), what="confirmed by the bound claim"
        )
        assert replica.running()
