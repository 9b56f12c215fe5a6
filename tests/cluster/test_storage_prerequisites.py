"""The storage-prerequisites verdict of real controller replicas: logged at start, before either
holds the lease, and exported on every scrape so fixing the cluster clears it without a restart."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from cluster.catalog_stack import CatalogStack, stack_fixture
from fakes.hub import FakeHub
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import InstalledModule, install_module

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
    claim = cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "shared-llama",
                "namespace": "default",
                "labels": {"ai.deckhouse.io/shared-pvc": "true"},
            },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "ceph-rwx",
                "resources": {"requests": {"storage": "10Gi"}},
            },
            "status": {"phase": "Pending"},
        }
    )

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
