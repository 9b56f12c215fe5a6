"""The node's cache report and readiness label, patched onto its Node in the API emulator with the
node cache's own ServiceAccount (get and patch on nodes, as its ClusterRole grants)."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.names import NODE_CACHE_READY_LABEL, NODE_CACHE_REPORT_ANNOTATION
from ai_models.nodecache.cache import Ready
from ai_models.nodecache.report import NodeReporter
from support.eventually import eventually
from support.node_cache_stack import CacheStack, cache_stack_fixture  # noqa: F401  (fixture)

MIB = 1024 * 1024
NODE = "node-a"


@pytest.fixture
def plugin_client(cache_stack: CacheStack) -> Iterator[Any]:
    cache_stack.emulator.cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    api_client = new_api_client(ClientOptions(retries=0), kubeconfig=str(cache_stack.kubeconfig(node=NODE)))
    yield api_client
    api_client.close()


def node(stack: CacheStack) -> dict[str, Any]:
    code, _, body = stack.emulator.request("GET", f"/api/v1/nodes/{NODE}")
    assert code == 200, body
    assert isinstance(body, dict)
    return body


def report_of(stack: CacheStack) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        node(stack)["metadata"]["annotations"][NODE_CACHE_REPORT_ANNOTATION]
    )
    return document


def test_the_node_says_its_cache_is_ready_and_what_it_holds(
    cache_stack: CacheStack, plugin_client: Any
) -> None:
    request = cache_stack.publish("llama", {"w.bin": random.Random(1).randbytes(MIB)})
    cache = cache_stack.cache(limit_bytes=10 * MIB)
    reporter = NodeReporter(cache=cache, api_client=plugin_client, node_name=NODE)
    assert reporter.publish()
    assert node(cache_stack)["metadata"]["labels"][NODE_CACHE_READY_LABEL] == "true"
    empty = report_of(cache_stack)
    assert {key: empty[key] for key in ("limitBytes", "usedBytes", "availableBytes", "readyDigests")} == {
        "limitBytes": 10 * MIB,
        "usedBytes": 0,
        "availableBytes": 10 * MIB,
        "readyDigests": [],
    }
    assert empty["updatedAt"].endswith("Z")

    # Nothing changed: no patch.
    version = node(cache_stack)["metadata"]["resourceVersion"]
    assert reporter.publish()
    assert node(cache_stack)["metadata"]["resourceVersion"] == version

    assert isinstance(cache.wait(request, timeout=60), Ready)
    assert reporter.publish()
    held = report_of(cache_stack)
    assert held["readyDigests"] == [request.digest]
    assert held["usedBytes"] == MIB
    assert held["availableBytes"] == 9 * MIB
    annotation = node(cache_stack)["metadata"]["annotations"][NODE_CACHE_REPORT_ANNOTATION]
    assert " " not in annotation  # compact

    reporter.close()
    assert node(cache_stack)["metadata"]["labels"][NODE_CACHE_READY_LABEL] == "false"


def test_an_unusable_cache_root_takes_the_label_away(cache_stack: CacheStack, plugin_client: Any) -> None:
    cache = cache_stack.cache()
    reporter = NodeReporter(cache=cache, api_client=plugin_client, node_name=NODE)
    assert reporter.publish()
    assert node(cache_stack)["metadata"]["labels"][NODE_CACHE_READY_LABEL] == "true"
    shutil.rmtree(cache_stack.root)  # the disk under the cache root went away
    assert reporter.publish()
    assert node(cache_stack)["metadata"]["labels"][NODE_CACHE_READY_LABEL] == "false"
    assert report_of(cache_stack)["readyDigests"] == []


def test_the_reporter_runs_in_the_background_and_a_refused_patch_is_not_fatal(
    cache_stack: CacheStack, plugin_client: Any
) -> None:
    cache = cache_stack.cache()
    other = NodeReporter(cache=cache, api_client=plugin_client, node_name="no-such-node")
    assert not other.publish()
    reporter = NodeReporter(
        cache=cache, api_client=plugin_client, node_name=NODE, interval_seconds=0.05
    ).start()
    try:
        eventually(
            lambda: node(cache_stack)["metadata"].get("labels", {}).get(NODE_CACHE_READY_LABEL) == "true",
            timeout=10,
            message="the background reporter to label the node",
        )
    finally:
        reporter.close()
