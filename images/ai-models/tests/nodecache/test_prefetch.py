"""Prefetch: a pod bound to this node starts its model's download before any mount is asked for,
authorized as NodePublish is (the Pod's own namespace decides; the volume attributes are hints)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.names import NODE_CACHE_DRIVER, VOLUME_DIGEST_ATTRIBUTE, VOLUME_MODEL_ATTRIBUTE
from ai_models.nodecache.cache import CacheRequest, NodeCache
from ai_models.nodecache.models import NodeModels
from ai_models.nodecache.prefetch import Prefetcher, trimmed
from support.eventually import eventually
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)

MIB = 1024 * 1024
NODE = "node-a"


def pod(name: str, *, namespace: str, node: str, model: str, digest: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "example.com/serve:1"}],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {
                    "name": "ai-models-cache-1",
                    "csi": {
                        "driver": NODE_CACHE_DRIVER,
                        "readOnly": True,
                        "volumeAttributes": {VOLUME_MODEL_ATTRIBUTE: model, VOLUME_DIGEST_ATTRIBUTE: digest},
                    },
                },
            ],
        },
    }


@pytest.fixture
def prefetching(cache_stack: CacheStack) -> Iterator[NodeCache]:
    api_client = new_api_client(ClientOptions(retries=0), kubeconfig=str(cache_stack.kubeconfig(node=NODE)))
    cache = cache_stack.cache()
    prefetcher = Prefetcher(
        cache=cache, models=NodeModels.of_cluster(api_client), api_client=api_client, node_name=NODE
    ).start()
    try:
        eventually(lambda: prefetcher.synced, timeout=10, message="the pod informer to sync")
        yield cache
    finally:
        prefetcher.close()
        api_client.close()


def ready(cache: NodeCache, request: CacheRequest) -> bool:
    return request.digest in cache.report().ready_digests


def test_a_pod_bound_to_the_node_has_its_model_fetched_before_any_mount(
    cache_stack: CacheStack, prefetching: NodeCache
) -> None:
    files = {"w.bin": random.Random(1).randbytes(MIB)}
    request = cache_stack.publish("llama", files)
    other_node = cache_stack.publish("other", {"w.bin": random.Random(2).randbytes(MIB)})
    cache_stack.emulator.cluster.apply(
        pod("elsewhere", namespace="team-a", node="node-b", model="other", digest=other_node.digest)
    )
    cache_stack.emulator.cluster.apply(
        pod("web-1", namespace="team-a", node=NODE, model="llama", digest=request.digest)
    )
    eventually(lambda: ready(prefetching, request), timeout=30, message="the prefetched tree")
    assert cache_stack.store.files_read() == MIB  # the pod of another node fetched nothing


def test_a_pod_naming_another_namespaces_model_or_digest_fetches_nothing(
    cache_stack: CacheStack, prefetching: NodeCache
) -> None:
    private = cache_stack.publish("private", {"w.bin": random.Random(1).randbytes(MIB)}, namespace="team-a")
    allowed = cache_stack.publish("llama", {"w.bin": random.Random(2).randbytes(MIB)}, namespace="team-b")
    cache_stack.emulator.cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}
    )
    # Hand-written attributes: team-a's model from team-b, and a digest the Model does not publish.
    cache_stack.emulator.cluster.apply(
        pod("thief", namespace="team-b", node=NODE, model="private", digest=private.digest)
    )
    cache_stack.emulator.cluster.apply(
        pod("stale", namespace="team-b", node=NODE, model="llama", digest=private.digest)
    )
    cache_stack.emulator.cluster.apply(
        pod("web-1", namespace="team-b", node=NODE, model="llama", digest=allowed.digest)
    )
    # One worker, in order: once the last pod's model is there, the other two were refused.
    eventually(lambda: ready(prefetching, allowed), timeout=30, message="the allowed pod's tree")
    assert prefetching.report().ready_digests == (allowed.digest,)
    assert cache_stack.store.files_read() == MIB


def test_the_informer_keeps_only_what_prefetch_reads() -> None:
    full = pod("web-1", namespace="team-a", node=NODE, model="llama", digest="sha256:" + "a" * 64)
    full["metadata"].update({"uid": "u-1", "labels": {"app": "web"}, "managedFields": [{}]})
    full["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}
    slim = trimmed(full)
    assert slim == {
        "metadata": {"name": "web-1", "namespace": "team-a", "uid": "u-1"},
        "spec": {"volumes": [{"csi": full["spec"]["volumes"][1]["csi"]}]},
        "status": {"phase": "Pending"},
    }
