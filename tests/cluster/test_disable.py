"""Disabling the module on a cluster with delivered workloads, in both delivery modes (D158).

Each test delivers workloads with the real controller and webhook, then plays what Deckhouse does
on disable: Helm deletes the release (the controller and api stop, the MutatingWebhookConfiguration
and the CSIDriver go), then addon-operator runs `hooks/disable_cleanup.py` on afterDeleteHelm. The
hook's snapshots are the cluster's objects as its bindings select them (label and field selectors
over the API), filtered by a real jq engine; its patch-collector output is applied to the emulator
over the API. Afterwards a new Pod of every workload is neither gated nor mounts a module volume
and runs, the Pods that waited run, the Nodes carry nothing of the node plugin, and a namespace
with a Model deletes.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import jq  # type: ignore[import-not-found]
import pytest
from deckhouse import hook

from ai_models import names
from ai_models.domain.delivery.template import applied, cache_volumes, gated
from cluster.delivery_stack import DeliveryStack, deployment, shared_delivery_stack
from cluster.model_stack import USER_NAMESPACE
from cluster.node_cache_stack import NodeCacheStack, model_files, node_cache_environment, node_cache_stack
from fakes.hub_corpus import repository
from fakes.s3 import MotoS3
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually
from support.hooks import load_hook

TINY = repository("acme/tiny-llama", model_files("disable-shared"))
CACHED = repository("acme/cached-llama", model_files("disable-cache"))
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def shared_pvc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeliveryStack]:
    with shared_delivery_stack(tmp_path_factory.mktemp("disable-shared-pvc"), [TINY]) as stack:
        yield stack


@pytest.fixture(scope="module")
def node_cache(tmp_path_factory: pytest.TempPathFactory, moto_s3: MotoS3) -> Iterator[NodeCacheStack]:
    workdir = tmp_path_factory.mktemp("disable-node-cache")
    with node_cache_environment(workdir, moto_s3, [CACHED]) as (emulator, hub, bucket):
        yield from node_cache_stack(emulator, hub, bucket, workdir)


# ----- addon-operator's part -----------------------------------------------------------------------


def _collection(emulator: RunningEmulator, api_version: str, kind: str) -> str:
    rtype = emulator.cluster.resource_for(api_version, kind)
    base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
    return f"{base}/{rtype.plural}"


def _item(emulator: RunningEmulator, api_version: str, kind: str, namespace: str, name: str) -> str:
    rtype = emulator.cluster.resource_for(api_version, kind)
    base = f"/api/{rtype.version}" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
    where = f"/namespaces/{namespace}" if rtype.namespaced and namespace else ""
    return f"{base}{where}/{rtype.plural}/{name}"


def _query(binding: Mapping[str, Any]) -> str:
    query = {}
    selector = binding.get("labelSelector") or {}
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        assert expression["operator"] == "Exists", expression
        terms.append(expression["key"])
    if terms:
        query["labelSelector"] = ",".join(terms)
    fields = (binding.get("fieldSelector") or {}).get("matchExpressions") or []
    if fields:
        assert all(item["operator"] == "Equals" for item in fields), fields
        query["fieldSelector"] = ",".join(f"{item['field']}={item['value']}" for item in fields)
    return "?" + urllib.parse.urlencode(query) if query else ""


def snapshots(emulator: RunningEmulator, config: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every binding's snapshot as shell-operator keeps it: the jq output of each object it selects."""
    result: dict[str, list[dict[str, Any]]] = {}
    for binding in config["kubernetes"]:
        path = _collection(emulator, binding["apiVersion"], binding["kind"]) + _query(binding)
        status, _, listed = emulator.request("GET", path)
        assert status == 200, listed
        program = jq.compile(binding["jqFilter"])
        result[binding["name"]] = [
            {"filterResult": program.input_value(item).first()} for item in listed["items"]
        ]
    return result


def apply_operations(emulator: RunningEmulator, operations: list[dict[str, Any]]) -> None:
    """The patch collector's output applied as shell-operator's ObjectPatcher does (in order)."""
    for operation in operations:
        path = _item(
            emulator,
            operation["apiVersion"],
            operation["kind"],
            operation.get("namespace") or "",
            operation["name"],
        )
        if operation["operation"] == "JSONPatch":
            status, _, body = emulator.request(
                "PATCH", path, body=operation["jsonPatch"], content_type="application/json-patch+json"
            )
            assert status == 200 or (status == 404 and operation.get("ignoreMissingObject")), (
                operation,
                body,
            )
        elif operation["operation"] == "MergePatch":
            status, _, body = emulator.request(
                "PATCH", path, body=operation["mergePatch"], content_type=MERGE
            )
            assert status == 200 or (status == 404 and operation.get("ignoreMissingObject")), (
                operation,
                body,
            )
        else:
            propagation = {"Delete": "Foreground", "DeleteInBackground": "Background"}[operation["operation"]]
            status, _, body = emulator.request(
                "DELETE", path, body={"kind": "DeleteOptions", "propagationPolicy": propagation}
            )
            assert status in (200, 202, 404), (operation, body)


def play_disable(emulator: RunningEmulator, stop: Any) -> list[dict[str, Any]]:
    """Helm deletes the release, then the afterDeleteHelm hook runs; its operations."""
    stop()
    for kind, name in (
        ("MutatingWebhookConfiguration", names.DELIVERY_WEBHOOK_CONFIGURATION),
        ("CSIDriver", names.NODE_CACHE_DRIVER),
    ):
        api_version = (
            "admissionregistration.k8s.io/v1" if kind.startswith("Mutating") else "storage.k8s.io/v1"
        )
        status, _, body = emulator.request("DELETE", _item(emulator, api_version, kind, "", name))
        assert status in (200, 202, 404), body
    cleanup = load_hook("disable_cleanup")
    config = json.loads(cleanup.config)
    output = hook.testrun(
        cleanup.main,
        binding_context=[{"binding": "afterDeleteHelm", "snapshots": snapshots(emulator, config)}],
    )
    operations: list[dict[str, Any]] = output.kube_operations.data
    apply_operations(emulator, operations)
    return operations


def get(emulator: RunningEmulator, path: str) -> dict[str, Any] | None:
    status, _, body = emulator.request("GET", path)
    if status == 404:
        return None
    assert status == 200, body
    result: dict[str, Any] = body
    return result


def pods_of(emulator: RunningEmulator, namespace: str, app: str) -> list[dict[str, Any]]:
    listed = get(emulator, f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{app}")
    assert listed is not None
    return [pod for pod in listed["items"] if not pod["metadata"].get("deletionTimestamp")]


def plain_running(pod: Mapping[str, Any]) -> bool:
    """A Pod that runs without anything of the module: no gate, no claim volume, no cache volume."""
    volumes = {volume.get("name") for volume in pod["spec"].get("volumes") or ()}
    return (
        not gated(pod)
        and names.SHARED_PVC_VOLUME not in volumes
        and not cache_volumes(pod)
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def wait_plain_pods(emulator: RunningEmulator, namespace: str, app: str, *, every: bool) -> None:
    """Wait until a Pod of the workload (`every`: all its Pods) runs without the module's part."""

    def plain() -> bool:
        pods = pods_of(emulator, namespace, app)
        found = [plain_running(pod) for pod in pods]
        return bool(found) and (all(found) if every else any(found))

    eventually(plain, timeout=90, message=lambda: f"{namespace}/{app}: {pods_of(emulator, namespace, app)}")


def assert_left_to_the_user(emulator: RunningEmulator, namespace: str, name: str) -> None:
    workload = get(emulator, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    assert workload is not None
    template = workload["spec"]["template"]
    assert applied(template) is None, template
    assert not gated(template), template
    assert names.DELIVERY_TEMPLATE_LABEL not in (workload["metadata"].get("labels") or {})
    assert names.DELIVERY_REASON_ANNOTATION not in (workload["metadata"].get("annotations") or {})
    assert template["spec"]["containers"][0].get("env") in (None, [])


def assert_namespace_deletes(emulator: RunningEmulator, namespace: str) -> None:
    status, _, body = emulator.request("DELETE", f"/api/v1/namespaces/{namespace}")
    assert status in (200, 202), body
    eventually(
        lambda: get(emulator, f"/api/v1/namespaces/{namespace}") is None,
        timeout=60,
        message=lambda: (
            f"namespace {namespace} still there: {get(emulator, f'/api/v1/namespaces/{namespace}')}"
        ),
    )


def labelled(emulator: RunningEmulator, namespace: str, name: str) -> bool:
    workload = get(emulator, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}") or {}
    labels = (workload.get("metadata") or {}).get("labels") or {}
    return labels.get(names.DELIVERY_TEMPLATE_LABEL) == names.DELIVERY_TEMPLATE_LABEL_VALUE


# ----- the two modes -----------------------------------------------------------------------------------


def test_disabling_in_shared_pvc_mode_starts_new_pods_keeps_the_claim_and_lets_the_namespace_go(
    shared_pvc: DeliveryStack,
) -> None:
    stack = shared_pvc
    emulator = stack.emulator
    namespace = stack.namespace
    stack.ready_model("tiny", "acme/tiny-llama")
    stack.apply_workload(deployment("web", models="tiny"))
    stack.apply_workload(deployment("waiting", models="absent"))  # never Ready: its Pod stays gated
    stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED)
    stack.wait_reason("Deployment", "waiting", names.DeliveryReason.MODEL_NOT_READY)
    eventually(lambda: any(gated(pod) for pod in pods_of(emulator, namespace, "waiting")), timeout=60)
    assert labelled(emulator, namespace, "web")
    assert labelled(emulator, namespace, "waiting")
    claims = [claim["metadata"]["name"] for claim in stack.claims()]
    assert claims

    operations = play_disable(emulator, stack.models.stop_all)

    assert {(op["kind"], op["name"]) for op in operations} >= {
        ("Deployment", "web"),
        ("Deployment", "waiting"),
        ("Model", "tiny"),
    }
    for name in ("web", "waiting"):
        assert_left_to_the_user(emulator, namespace, name)
        wait_plain_pods(emulator, namespace, name, every=True)
    # The claims hold the model files: the hook keeps them (the log names them).
    assert sorted(claim["metadata"]["name"] for claim in stack.claims()) == sorted(claims)
    assert_namespace_deletes(emulator, namespace)


def test_disabling_in_node_cache_mode_starts_new_pods_without_cache_volumes_and_lets_the_namespace_go(
    node_cache: NodeCacheStack,
) -> None:
    """A Pod that mounted a cache volume cannot be torn down once the node plugin is gone (kubelet
    needs the driver to unmount): its namespace waits for it, as in a real cluster, so the
    namespace deleted here is one whose Pods never mounted one (D158, ADMIN_GUIDE)."""
    stack = node_cache
    delivery = stack.delivery
    emulator = stack.emulator
    namespace, waiting = USER_NAMESPACE, "team-c"
    delivery.core.create_namespace({"metadata": {"name": waiting}})
    delivery.ready_model("cached", "acme/cached-llama", namespace=namespace)
    delivery.models.create_model("lost", {"url": "https://huggingface.co/acme/missing"}, namespace=waiting)
    delivery.apply_workload(deployment("reader", models="cached", namespace=namespace))
    delivery.apply_workload(deployment("waiting", models="lost", namespace=waiting))
    delivery.wait_reason("Deployment", "reader", names.DeliveryReason.DELIVERED, namespace=namespace)
    delivery.wait_reason("Deployment", "waiting", names.DeliveryReason.MODEL_NOT_READY, namespace=waiting)
    stack.wait_running(1, namespace=namespace, selector="app=reader")
    eventually(lambda: any(gated(pod) for pod in pods_of(emulator, waiting, "waiting")), timeout=60)
    model_path = f"/apis/{names.API_GROUP}/{names.API_VERSION}/namespaces/{waiting}/models/lost"
    eventually(
        lambda: (
            names.MODEL_FINALIZER
            in ((get(emulator, model_path) or {}).get("metadata") or {}).get("finalizers", [])
        ),
        timeout=60,
        message="the controller's finalizer on Model team-c/lost",
    )
    assert labelled(emulator, namespace, "reader")

    def stop() -> None:
        delivery.models.stop_all()
        for plugin in stack.plugins.values():
            plugin.process.kill()

    operations = play_disable(emulator, stop)

    assert ("Deployment", "reader") in {(op["kind"], op["name"]) for op in operations}
    assert_left_to_the_user(emulator, namespace, "reader")
    assert_left_to_the_user(emulator, waiting, "waiting")
    workload = get(emulator, f"/apis/apps/v1/namespaces/{namespace}/deployments/reader")
    assert workload is not None
    assert names.NODE_CACHE_READY_LABEL not in (
        workload["spec"]["template"]["spec"].get("nodeSelector") or {}
    )
    for where, app in ((namespace, "reader"), (waiting, "waiting")):
        wait_plain_pods(emulator, where, app, every=False)
    nodes = get(emulator, "/api/v1/nodes")
    assert nodes is not None
    for node in nodes["items"]:
        assert names.NODE_CACHE_READY_LABEL not in (node["metadata"].get("labels") or {}), node["metadata"]
        assert names.NODE_CACHE_REPORT_ANNOTATION not in (node["metadata"].get("annotations") or {})
    assert_namespace_deletes(emulator, waiting)
