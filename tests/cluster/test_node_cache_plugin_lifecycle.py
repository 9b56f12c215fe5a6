"""NodeCache delivery when the node plugin goes away and when its cache is full: the real
`ai-models node-cache` killed mid-download and while pods run, and a cache whose budget is held by
trees pods mount. The test bed's CSI kubelet calls the plugin over its socket as kubelet does.

One stack serves the file; each test has its own models and workloads, and a test that restarts a
plugin with other settings gives it its usual ones back.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ai_models.domain.delivery.claim_layout import STAGING_DIR
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
from testbed.csi_kubelet import is_mount_point, mount_points

NODE_A, NODE_B = NODES
# 2 MiB of weights: slow enough through the throttled proxy to kill the plugin midway.
LARGE = model_files("large", rows=8192)
KEPT = model_files("kept")
HELD = model_files("held")
REFUSED = model_files("refused")
CORPUS = [
    repository("acme/large-llama", LARGE),
    repository("acme/kept-llama", KEPT),
    repository("acme/held-llama", HELD),
    repository("acme/refused-llama", REFUSED),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoS3) -> Iterator[NodeCacheStack]:
    workdir = tmp_path_factory.mktemp("node-cache-lifecycle")
    with node_cache_environment(workdir, moto_s3, CORPUS) as (emulator, hub, bucket):
        yield from node_cache_stack(emulator, hub, bucket, workdir)


def staged_bytes(stack: NodeCacheStack, node: str) -> int:
    """Bytes of files under the cache root that are in no complete tree yet (staging)."""
    root = stack.plugins[node].cache_root
    return sum(
        path.stat().st_size for path in root.rglob("*") if path.is_file() and STAGING_DIR in path.parts
    )


def settled(read: Callable[[], float], *, quiet_seconds: float = 1.0, timeout: float = 30.0) -> float:
    """`read()` once it has not changed for `quiet_seconds`."""
    deadline = time.monotonic() + timeout
    value = read()
    while True:
        time.sleep(quiet_seconds)
        again = read()
        if again == value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still changing after {timeout:g} s: {value} -> {again}")
        value = again


def mounted_targets(stack: NodeCacheStack, node: str) -> set[str]:
    pods_dir = (stack.nodes[node].kubelet_dir / "pods").absolute()
    return {str(point) for point in mount_points() if point.is_relative_to(pods_dir)}


def test_the_plugin_killed_mid_download_resumes_and_never_mounts_partial_content(
    stack: NodeCacheStack,
) -> None:
    stack.delivery.ready_model("large", "acme/large-llama", namespace=USER_NAMESPACE)
    manifest = fetch(
        f"http://127.0.0.1:{stack.delivery.models.api_port}/api/serving/v1/models/{USER_NAMESPACE}/large/manifest",
        token=stack.delivery.models.uploader().token,
    )
    stack.api_proxy.rate = 256 * 1024  # bytes a second: the 2 MiB take about 8 s
    try:
        stack.delivery.apply_workload(on_node(deployment("large", models="large"), NODE_A))
        stack.eventually(
            lambda: staged_bytes(stack, NODE_A) > 0,
            timeout=60,
            what=lambda: f"a download under way on {NODE_A}: {stack.describe(selector='app=large')}",
        )
        [pod] = stack.pods(selector="app=large")
        assert not mounted_targets(stack, NODE_A) & {str(m.target) for m in stack.csi_mounts(pod)}

        stack.kill_plugin(NODE_A)
        staged = staged_bytes(stack, NODE_A)
        # The api counts a chunk when it hands it to the connection: what it sent towards the killed
        # plugin (held in the proxy and socket buffers) is counted until it notices the peer is gone.
        bytes_before = settled(stack.served_bytes)
        manifests_before = stack.served("manifest")
        assert (stack.pod(pod["metadata"]["name"]).get("status") or {}).get("phase") == "Pending"
        for mount in stack.csi_mounts(pod):
            assert not is_mount_point(mount.target), "a partial tree was mounted"
        stack.api_proxy.rate = None
        stack.start_plugin(NODE_A)

        [running] = stack.wait_running(1, selector="app=large", timeout=120)
    finally:
        stack.api_proxy.rate = None
    assert stack.delivered_files(running, "large") == digests(LARGE)
    # Resumed: after the restart the serving API sent the files' bytes not staged yet, not all again.
    manifests = stack.served("manifest") - manifests_before
    resent = stack.served_bytes() - bytes_before - manifests * len(manifest)
    assert 0 < resent <= sum(len(data) for data in LARGE.values()) - staged, (resent, staged)
    waits = [m for m in stack.failed_mounts(running) if "code = Unavailable" in m]
    assert waits, stack.failed_mounts(running)


def test_the_plugin_restarted_while_pods_run_keeps_their_mounts_and_unpublishes_them_later(
    stack: NodeCacheStack,
) -> None:
    stack.delivery.ready_model("kept", "acme/kept-llama", namespace=USER_NAMESPACE)
    stack.delivery.apply_workload(on_node(deployment("kept", models="kept", replicas=2), NODE_A))
    pods = stack.wait_running(2, selector="app=kept")
    targets = {str(m.target) for pod in pods for m in stack.csi_mounts(pod)}
    assert targets <= mounted_targets(stack, NODE_A)

    stack.kill_plugin(NODE_A)
    stack.start_plugin(NODE_A)
    stack.wait_nodes_ready([NODE_A])

    assert targets <= mounted_targets(stack, NODE_A)
    for pod in pods:
        assert stack.delivered_files(pod, "kept") == digests(KEPT)
    kept = digest_of(stack, "kept")
    stack.eventually(
        lambda: kept in stack.node_report(NODE_A).get("readyDigests", []),
        timeout=30,
        what=lambda: f"{kept} reported ready by the restarted plugin: {stack.node_report(NODE_A)}",
    )

    stack.delivery.apps.delete_namespaced_deployment("kept", USER_NAMESPACE)
    stack.eventually(
        lambda: not stack.pods(selector="app=kept"),
        timeout=60,
        what=lambda: f"the pods gone after their teardown: {stack.describe(selector='app=kept')}",
    )
    assert not targets & mounted_targets(stack, NODE_A)


def test_a_cache_full_of_referenced_trees_refuses_a_new_one_and_evicts_nothing_referenced(
    stack: NodeCacheStack,
) -> None:
    stack.delivery.ready_model("held", "acme/held-llama", namespace=USER_NAMESPACE)
    stack.delivery.ready_model("refused", "acme/refused-llama", namespace=USER_NAMESPACE)
    held, refused = digest_of(stack, "held"), digest_of(stack, "refused")
    one_tree = sum(len(data) for data in HELD.values())
    # Room for one tree, not two; unreferenced trees of other tests may go at once (no grace).
    budget = f"{(one_tree * 3 // 2) // 1024}Ki"
    stack.kill_plugin(NODE_B)
    stack.start_plugin(
        NODE_B, AI_MODELS_NODE_CACHE_SIZE=budget, AI_MODELS_NODE_CACHE_EVICTION_GRACE_SECONDS="0"
    )
    try:
        stack.wait_nodes_ready([NODE_B])
        stack.emulator.apply(
            bare_pod("holder", namespace=USER_NAMESPACE, node=NODE_B, volume=csi_volume("held", held))
        )
        holder = stack.pod("holder")
        stack.eventually(
            lambda: (stack.pod("holder").get("status") or {}).get("phase") == "Running",
            timeout=60,
            what=lambda: f"the holder running: {stack.failed_mounts(holder)}",
        )
        stack.emulator.apply(
            bare_pod("newcomer", namespace=USER_NAMESPACE, node=NODE_B, volume=csi_volume("refused", refused))
        )
        newcomer = stack.pod("newcomer")

        stack.eventually(
            functools.partial(exhausted, stack, newcomer),
            timeout=60,
            what=lambda: f"a ResourceExhausted FailedMount of the newcomer: {stack.failed_mounts(newcomer)}",
        )
        [message] = {m for m in stack.failed_mounts(newcomer) if "code = ResourceExhausted" in m}
        # Named: the pod, the Model and its digest (the sizes follow).
        assert f"pod {USER_NAMESPACE}/newcomer" in message, message
        assert refused in message, message
        assert (stack.pod("newcomer").get("status") or {}).get("phase") == "Pending"
        assert stack.delivered_files(stack.pod("holder"), "held") == digests(HELD)
        assert (stack.tree(NODE_B, held) / "config.json").read_bytes() == HELD["config.json"]
        stack.eventually(
            lambda: held in stack.node_report(NODE_B).get("readyDigests", []),
            timeout=30,
            what=lambda: f"{held} reported ready on {NODE_B}: {stack.node_report(NODE_B)}",
        )
        assert refused not in stack.node_report(NODE_B)["readyDigests"]
    finally:
        for name in ("holder", "newcomer"):
            stack.core.delete_namespaced_pod(name, USER_NAMESPACE)
        stack.eventually(
            lambda: not {p["metadata"]["name"] for p in stack.pods()} & {"holder", "newcomer"},
            timeout=60,
            what="the hand-written pods gone",
        )
        stack.kill_plugin(NODE_B)
        stack.start_plugin(NODE_B)


def exhausted(stack: NodeCacheStack, pod: dict[str, Any]) -> bool:
    return any("code = ResourceExhausted" in message for message in stack.failed_mounts(pod))
