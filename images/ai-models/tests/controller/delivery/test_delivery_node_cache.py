"""The delivery controller in NodeCache mode (built in the test process on the one runtime) against
the API emulator: no claim and no Job, the template rewritten with the inline CSI volumes and the
placement once the model is Ready, capacity judged from the setting and the Nodes' reports (a
Node's new report wakes a workload that waited for a larger cache), and the shared claim of an
earlier SharedPVC delivery taken back (D100)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS
from ai_models.controller.delivery.node_cache import NodeCacheDelivery
from ai_models.controller.delivery.observe import observation
from ai_models.controller.delivery.runtime import DeliveryRuntime
from ai_models.controller.delivery.steps import DeliverySettings
from ai_models.controller.runtime import Manager
from ai_models.domain.delivery.claims import Artifact, claim_manifest
from ai_models.domain.delivery.contract import workload_of
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.modes.node_cache import NodeCache
from ai_models.domain.delivery.placement import NodeCacheSeen
from ai_models.domain.delivery.template import applied, cache_volumes, gated, node_cache_volume, strip
from ai_models.domain.delivery.verdict import admit
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    MODEL_ANNOTATION,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_REPORT_ANNOTATION,
    DeliveryReason,
    ModelKind,
)
from fakes.served_artifacts import create_model, mark_ready
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually

NAMESPACE = "team-a"
GIB = 1024**3
GPU = {"node-role.example.com/gpu": "true"}
DIGEST = "sha256:" + "a1" * 32
BIG_DIGEST = "sha256:" + "b2" * 32
SECONDS = 30
MODEL_RESOURCES = {ModelKind.MODEL: MODELS, ModelKind.CLUSTER_MODEL: CLUSTER_MODELS}


class Stack:
    def __init__(
        self,
        emulator: RunningEmulator,
        runtime: DeliveryRuntime,
        models: dict[ModelKind, Informer],
        settings: NodeCacheSeen,
    ):
        self.settings = settings
        self.emulator = emulator
        self.runtime = runtime
        self.models = models

    def get(self, path: str) -> dict[str, Any] | None:
        code, _, body = self.emulator.request("GET", path)
        if code == 404:
            return None
        assert code == 200, body
        found: dict[str, Any] = body
        return found

    def items(self, path: str) -> list[dict[str, Any]]:
        listed = self.get(path)
        assert listed is not None
        return list(listed.get("items") or [])

    def deployment(self, name: str, *, models: str) -> dict[str, Any]:
        """A Deployment naming `models`, with the template the NodeCache admission writes."""
        obj: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {MODEL_ANNOTATION: models}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
                },
            },
        }
        keys = [ModelKey(ModelKind.MODEL, NAMESPACE, item) for item in models.split(",")]
        seen = observation(
            obj,
            models={key: self.models[key.kind].get(key.namespace, key.name) for key in keys},
            facts=self.settings,
        )
        admitted = admit(seen, NodeCache(), now=datetime.datetime.now(datetime.UTC)).template
        if admitted is not None:
            obj["spec"]["template"] = admitted
        return self.emulator.apply(obj)

    def workload(self, name: str) -> dict[str, Any]:
        found = self.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
        assert found is not None
        return found

    def report(self, name: str) -> tuple[str | None, str | None]:
        annotations = self.workload(name)["metadata"].get("annotations") or {}
        return annotations.get(DELIVERY_REASON_ANNOTATION), annotations.get(DELIVERY_MESSAGE_ANNOTATION)

    def reported(self, name: str, reason: DeliveryReason) -> Callable[[], bool]:
        return lambda: self.report(name)[0] == reason.value

    def node(self, name: str, *, labels: Mapping[str, str], limit: int | None) -> None:
        annotations = (
            {}
            if limit is None
            else {
                NODE_CACHE_REPORT_ANNOTATION: json.dumps(
                    {"limitBytes": limit, "usedBytes": 0, "availableBytes": limit, "readyDigests": []}
                )
            }
        )
        self.emulator.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": dict(labels), "annotations": annotations},
            }
        )


SETTINGS = NodeCacheSeen(selector=GPU, size_bytes=100 * GIB)
UNAVAILABLE = (
    "node-driver-registrar image for Kubernetes 1.35 missing: neither the module nor Deckhouse ships "
    "one, so the NodeCache node plugin is not deployed; set delivery.mode to SharedPVC"
)


@pytest.fixture
def node_cache_delivery(kube_emulator: RunningEmulator) -> Iterator[Stack]:
    """The delivery runtime in NodeCache mode (delivery.nodeCache.size 100Gi, nodeSelector GPU),
    with a claim grace of 0 s; stopped when the test ends."""
    with running(kube_emulator, SETTINGS) as stack:
        yield stack


@pytest.fixture
def node_plugin_missing(kube_emulator: RunningEmulator) -> Iterator[Stack]:
    """The same runtime in a release the chart rendered without the node plugin (D162)."""
    with running(kube_emulator, dataclasses.replace(SETTINGS, unavailable=UNAVAILABLE)) as stack:
        yield stack


@contextlib.contextmanager
def running(kube_emulator: RunningEmulator, settings: NodeCacheSeen) -> Iterator[Stack]:
    with contextlib.ExitStack() as cleanup:
        kube_emulator.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        client = kube_emulator.api_client()
        cleanup.callback(client.close)
        models = {kind: Informer(client, resource) for kind, resource in MODEL_RESOURCES.items()}

        def model_of(key: ModelKey) -> Mapping[str, Any] | None:
            return models[key.kind].get(key.namespace, key.name)

        runtime = DeliveryRuntime(
            api_client=client,
            model_of=model_of,
            strategy=lambda informers: NodeCacheDelivery(client, settings=settings),
            settings=DeliverySettings(claim_grace=datetime.timedelta(0)),
            resync_seconds=None,
        )
        manager = Manager(sync_timeout_seconds=10)
        for informer in models.values():
            informer.add_handler(runtime.model_changed)
            manager.informer(informer)
        runtime.attach(manager)
        stop = threading.Event()
        thread = threading.Thread(target=manager.run, args=(stop,), name="delivery-manager", daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            thread.join(timeout=30)

        cleanup.callback(halt)
        yield Stack(kube_emulator, runtime, models, settings)


def test_node_cache_mode_delivers_without_claim_or_job_once_the_model_is_ready(
    node_cache_delivery: Stack,
) -> None:
    stack = node_cache_delivery
    followed = {informer.name for informer in stack.runtime.all_informers()}
    assert "node-cache-nodes" in followed
    assert not followed & {"delivery-volumes", "materialize-jobs"}
    stack.node("gpu-1", labels={**GPU, NODE_CACHE_READY_LABEL: "true"}, limit=50 * GIB)
    stack.node("cpu-1", labels={}, limit=GIB)  # not selected: its small cache limits nothing
    owner = create_model(stack.emulator, "llama", namespace=NAMESPACE)
    created = stack.deployment("web", models="llama")
    users = strip(created["spec"]["template"])
    assert gated(created["spec"]["template"]), "admitted while the model is not Ready: gated"
    eventually(
        stack.reported("web", DeliveryReason.MODEL_NOT_READY),
        timeout=SECONDS,
        message=lambda: str(stack.report("web")),
    )

    # A claim an earlier SharedPVC delivery made for this workload: taken back now (grace 0).
    workload = workload_of(stack.workload("web"))
    leftover = claim_manifest(workload=workload, artifacts=[Artifact(DIGEST, GIB)], storage_class="nfs")
    stack.emulator.apply(leftover)
    mark_ready(stack.emulator, owner, DIGEST, size=2 * GIB)

    eventually(
        stack.reported("web", DeliveryReason.DELIVERED),
        timeout=SECONDS,
        message=lambda: str(stack.report("web")),
    )
    template = stack.workload("web")["spec"]["template"]
    record = applied(template)
    assert record is not None
    assert record.mode is DeliveryMode.NODE_CACHE
    assert not gated(template)
    key = ModelKey(ModelKind.MODEL, NAMESPACE, "llama")
    assert cache_volumes(template) == {(node_cache_volume(key), DIGEST)}
    assert template["spec"]["nodeSelector"] == {**GPU, NODE_CACHE_READY_LABEL: "true"}
    assert strip(template) == users
    name = leftover["metadata"]["name"]
    eventually(
        lambda: stack.get(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{name}") is None,
        timeout=SECONDS,
        message=f"the earlier SharedPVC claim {name} deleted",
    )
    assert stack.items(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims") == []
    assert stack.items(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs") == []


def test_a_model_larger_than_every_reported_cache_waits_and_a_larger_report_delivers_it(
    node_cache_delivery: Stack,
) -> None:
    stack = node_cache_delivery
    stack.node("gpu-1", labels=GPU, limit=20 * GIB)
    stack.node("gpu-2", labels=GPU, limit=None)  # no report yet: neither allows nor forbids
    owner = create_model(stack.emulator, "big", namespace=NAMESPACE)
    mark_ready(stack.emulator, owner, BIG_DIGEST, size=30 * GIB)
    eventually(
        lambda: (
            ((stack.models[ModelKind.MODEL].get(NAMESPACE, "big") or {}).get("status") or {}).get("phase")
            == "Ready"
        ),
        timeout=SECONDS,
        message="the Model Ready in the controller's cache",
    )
    created = stack.deployment("big", models="big")
    # 30 GiB fits delivery.nodeCache.size (100Gi): admission writes it complete.
    assert not gated(created["spec"]["template"])

    eventually(
        stack.reported("big", DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY),
        timeout=SECONDS,
        message=lambda: str(stack.report("big")),
    )
    message = stack.report("big")[1] or ""
    assert "30.0 GiB" in message
    assert "20.0 GiB (node gpu-1, of 1 reporting" in message

    # The node plugin of gpu-2 starts and reports a larger cache: the workload is looked at again.
    stack.node("gpu-2", labels=GPU, limit=40 * GIB)
    eventually(
        stack.reported("big", DeliveryReason.DELIVERED),
        timeout=SECONDS,
        message=lambda: str(stack.report("big")),
    )


def test_without_the_node_plugin_a_workload_is_told_why_and_its_pods_stay_gated(
    node_plugin_missing: Stack,
) -> None:
    stack = node_plugin_missing
    stack.node("gpu-1", labels={**GPU, NODE_CACHE_READY_LABEL: "true"}, limit=50 * GIB)
    owner = create_model(stack.emulator, "llama", namespace=NAMESPACE)
    mark_ready(stack.emulator, owner, DIGEST, size=2 * GIB)
    created = stack.deployment("web", models="llama")

    eventually(
        stack.reported("web", DeliveryReason.NODE_CACHE_DELIVERY_DISABLED),
        timeout=SECONDS,
        message=lambda: str(stack.report("web")),
    )
    assert stack.report("web")[1] == UNAVAILABLE
    template = stack.workload("web")["spec"]["template"]
    assert not cache_volumes(template), "no inline volume of a driver no node serves"
    assert template == created["spec"]["template"]
