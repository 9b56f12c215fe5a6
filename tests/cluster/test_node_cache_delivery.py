"""NodeCache delivery end to end: the controller (webhook and reconciler) in NodeCache mode, the api,
and on each of two simulated nodes the real `ai-models node-cache` plugin, called by the test bed's
CSI kubelet over its socket as kubelet calls it. Workloads are created over the API; their pods
read the model at their volume's target, a real read-only bind mount of the node's cache.

One stack and its published models serve the whole file; each test has its own models (a digest no
other test caches) or its own namespace.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Iterator
from typing import Any

import pytest

from ai_models import names
from cluster.delivery_stack import deployment, digests
from cluster.model_stack import USER_NAMESPACE
from cluster.node_cache_stack import (
    NODES,
    NodeCacheStack,
    bare_pod,
    csi_volume,
    digest_of,
    fetch,
    model_files,
    node_cache_environment,
    node_cache_stack,
    on_node,
)
from fakes.hub_corpus import repository
from fakes.s3 import MotoS3

NODE_A, NODE_B = NODES
SHARED = model_files("shared")
MENDED = model_files("mended")
GUARDED = model_files("guarded")
OWN = model_files("own")
COMMON = model_files("common")
CORPUS = [
    repository("acme/own-llama", OWN),
    repository("acme/common-llama", COMMON),
    repository("acme/shared-llama", SHARED),
    repository("acme/mended-llama", MENDED),
    repository("acme/guarded-llama", GUARDED),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoS3) -> Iterator[NodeCacheStack]:
    workdir = tmp_path_factory.mktemp("node-cache-delivery")
    with node_cache_environment(workdir, moto_s3, CORPUS) as (emulator, hub, bucket):
        yield from node_cache_stack(emulator, hub, bucket, workdir)


def denied(stack: NodeCacheStack, pod: dict[str, Any]) -> bool:
    return any("code = PermissionDenied" in message for message in stack.failed_mounts(pod))


def test_eight_pods_of_two_workloads_on_one_node_cause_one_download_and_read_the_files_read_only(
    stack: NodeCacheStack,
) -> None:
    stack.delivery.ready_model("shared", "acme/shared-llama", namespace=USER_NAMESPACE)
    admin = stack.delivery.models.uploader()
    # The manifest as the plugin gets it, read before counting: the serving API's byte counter
    # counts manifests too.
    manifest = fetch(
        f"http://127.0.0.1:{stack.delivery.models.api_port}/api/serving/v1/models/{USER_NAMESPACE}/shared/manifest",
        token=admin.token,
    )
    files_before, bytes_before, manifests_before = (
        stack.served("files/"),
        stack.served_bytes(),
        stack.served("manifest"),
    )

    for name in ("reader", "writer"):
        stack.delivery.apply_workload(on_node(deployment(name, models="shared", replicas=4), NODE_A))

    for name in ("reader", "writer"):
        message = stack.delivery.wait_reason("Deployment", name, names.DeliveryReason.DELIVERED, timeout=90)
        assert "shared" in message
    pods = stack.wait_running(8, selector="app in (reader,writer)", timeout=120)
    assert {pod["spec"]["nodeName"] for pod in pods} == {NODE_A}
    for pod in pods:
        assert stack.delivered_files(pod, "shared") == digests(SHARED)
        [mount] = [m for m in stack.csi_mounts(pod) if m.mount_path == f"{names.MODELS_DIR}/shared"]
        with pytest.raises(OSError, match="Read-only file system") as refused:
            (mount.target / "written-by-a-pod").write_text("x")
        assert refused.value.errno == errno.EROFS
    file_answers = stack.served("files/") - files_before
    manifest_answers = stack.served("manifest") - manifests_before
    fetched = stack.served_bytes() - bytes_before - manifest_answers * len(manifest)
    assert (file_answers, fetched) == (len(SHARED), sum(len(data) for data in SHARED.values())), (
        f"{file_answers} file answers, {manifest_answers} manifests"
    )
    digest = digest_of(stack, "shared")
    stack.eventually(
        lambda: digest in stack.node_report(NODE_A).get("readyDigests", []),
        timeout=30,
        what=lambda: f"{digest} in the report of {NODE_A}: {stack.node_report(NODE_A)}",
    )
    assert stack.node_report(NODE_A)["usedBytes"] >= sum(len(data) for data in SHARED.values())


def test_a_pod_in_a_namespace_without_the_model_is_refused_even_with_hand_written_attributes(
    stack: NodeCacheStack,
) -> None:
    stack.delivery.ready_model("guarded", "acme/guarded-llama", namespace=USER_NAMESPACE)
    digest = digest_of(stack, "guarded")
    stack.core.create_namespace({"metadata": {"name": "intruders"}})
    # Attributes naming the Model of team-a with its true digest; kubelet writes the pod's namespace.
    intruder = bare_pod("intruder", namespace="intruders", node=NODE_B, volume=csi_volume("guarded", digest))
    forged = dict(intruder, metadata={"name": "forger", "namespace": "intruders"})
    forged_volume = csi_volume("guarded", digest)
    forged_volume["csi"]["volumeAttributes"][names.KUBELET_POD_NAMESPACE] = USER_NAMESPACE
    forged["spec"] = {**intruder["spec"], "volumes": [forged_volume]}
    wrong_digest = bare_pod(
        "wrong-digest",
        namespace=USER_NAMESPACE,
        node=NODE_B,
        volume=csi_volume("guarded", "sha256:" + "0" * 64),
    )
    for pod in (intruder, forged, wrong_digest):
        stack.emulator.apply(pod)
    try:
        for name, namespace in (
            ("intruder", "intruders"),
            ("forger", "intruders"),
            ("wrong-digest", USER_NAMESPACE),
        ):
            pod = stack.pod(name, namespace)
            stack.eventually(
                functools.partial(denied, stack, pod),
                timeout=30,
                what=f"a PermissionDenied FailedMount of {namespace}/{name}",
            )
            current = stack.pod(name, namespace)
            assert current["status"]["phase"] == "Pending"
            [mount] = stack.csi_mounts(current)
            assert not mount.target.exists()
        assert digest not in stack.node_report(NODE_B).get("readyDigests", [])
    finally:
        # Refused pods are retried for as long as they exist (kubelet does so too): not for the
        # rest of the file.
        stack.core.delete_namespace("intruders")
        stack.core.delete_namespaced_pod("wrong-digest", USER_NAMESPACE)


def test_a_corrupted_cached_file_is_detected_and_fetched_again(stack: NodeCacheStack) -> None:
    stack.delivery.ready_model("mended", "acme/mended-llama", namespace=USER_NAMESPACE)
    digest = digest_of(stack, "mended")
    stack.delivery.apply_workload(on_node(deployment("first", models="mended"), NODE_A))
    [first] = stack.wait_running(1, selector="app=first")
    assert stack.delivered_files(first, "mended") == digests(MENDED)
    tree = stack.tree(NODE_A, digest)
    weights = tree / "model.safetensors"
    damaged = bytearray(weights.read_bytes())
    damaged[-1] ^= 0xFF  # same size, one byte flipped: a disk or a hand that changed it
    weights.write_bytes(bytes(damaged))
    files_before = stack.served("files/")

    stack.delivery.apply_workload(on_node(deployment("second", models="mended"), NODE_A))

    [second] = stack.wait_running(1, selector="app=second")
    assert stack.delivered_files(second, "mended") == digests(MENDED)
    assert stack.served("files/") - files_before >= 1
    assert (stack.tree(NODE_A, digest) / "model.safetensors").read_bytes() == MENDED["model.safetensors"]


def test_the_nodes_report_their_cache_and_carry_the_readiness_label(stack: NodeCacheStack) -> None:
    for node in NODES:
        assert stack.node_ready(node)
        report = stack.node_report(node)
        assert set(report) >= {"limitBytes", "usedBytes", "availableBytes", "readyDigests", "updatedAt"}
        assert report["limitBytes"] == 64 * 2**20
        assert report["readyDigests"] == sorted(report["readyDigests"])
        assert 0 <= report["usedBytes"] <= report["limitBytes"]


def test_a_workload_of_a_model_and_a_cluster_model_gets_both_at_their_paths(stack: NodeCacheStack) -> None:
    stack.delivery.ready_model("own", "acme/own-llama", namespace=USER_NAMESPACE)
    stack.delivery.ready_model("common", "acme/common-llama", namespace=None)

    stack.delivery.apply_workload(on_node(deployment("both", models="own", cluster_models="common"), NODE_B))

    stack.delivery.wait_reason("Deployment", "both", names.DeliveryReason.DELIVERED, timeout=90)
    [pod] = stack.wait_running(1, selector="app=both")
    assert stack.delivered_files(pod, "own") == digests(OWN)
    assert stack.delivered_files(pod, "common") == digests(COMMON)
    volumes = [
        v for v in pod["spec"]["volumes"] if (v.get("csi") or {}).get("driver") == names.NODE_CACHE_DRIVER
    ]
    attributes = sorted(
        (key, value)
        for volume in volumes
        for key, value in volume["csi"]["volumeAttributes"].items()
        if key != names.VOLUME_DIGEST_ATTRIBUTE
    )
    assert attributes == [
        (names.VOLUME_CLUSTER_MODEL_ATTRIBUTE, "common"),
        (names.VOLUME_MODEL_ATTRIBUTE, "own"),
    ]
    env = {item["name"]: item.get("value") for item in pod["spec"]["containers"][0].get("env") or []}
    assert env[names.MODELS_DIR_VARIABLE] == names.MODELS_DIR
    assert pod["spec"]["nodeSelector"][names.NODE_CACHE_READY_LABEL] == "true"
