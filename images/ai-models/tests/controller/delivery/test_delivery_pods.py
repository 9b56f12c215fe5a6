"""Reads and writes of single steps against the API emulator: ungating a workload's Pods (only the
delivery gate goes, only from the workload's own Pods, and while it delivers only from the Pods that
get what the template's record names: its claim, or its node cache volumes with their digests), and a
bound claim's volume confirmed by a read."""

from __future__ import annotations

from typing import Any

from ai_models.adapters.kube.workloads import Workloads, label_selector
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.observe import observation
from ai_models.controller.delivery.shared_pvc import SharedPVCDelivery, SharedPVCSettings
from ai_models.controller.delivery.steps.pods import ungate_pods
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.claims import ClassChoice
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.template import (
    Applied,
    CachedModel,
    DeliveredModel,
    applied,
    node_cache_volume_source,
    rewrite,
    rewrite_for_node_cache,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_SCHEDULING_GATE,
    MODEL_ANNOTATION,
    NODE_CACHE_READY_LABEL,
    SHARED_PVC_VOLUME,
    ModelKind,
)

NAMESPACE = "team-a"
CLAIM = "ai-models-web-0123456789"
OTHER_GATE = "example.com/quota"
LLAMA = CachedModel(ModelKey(ModelKind.MODEL, NAMESPACE, "llama"), "sha256:" + "a1" * 32)


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": NAMESPACE,
            "uid": "uid-web",
            "resourceVersion": "1",
            "annotations": {MODEL_ANNOTATION: "llama"},
        },
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}},
        },
    }


def pod(
    name: str, *, owner: str, gates: list[str], claim: str | None = None, cached: CachedModel | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "server", "image": "inference:1"}],
        "schedulingGates": [{"name": gate} for gate in gates],
    }
    if claim is not None:
        spec["volumes"] = [{"name": SHARED_PVC_VOLUME, "persistentVolumeClaim": {"claimName": claim}}]
    if cached is not None:
        spec["volumes"] = [node_cache_volume_source(cached)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "web"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}"}
            ],
        },
        "spec": spec,
    }


def gates_of(emulator: Any) -> dict[str, list[str]]:
    code, _, body = emulator.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert code == 200, body
    return {
        item["metadata"]["name"]: [gate["name"] for gate in item["spec"].get("schedulingGates") or []]
        for item in body["items"]
    }


def subject() -> Subject:
    obj = deployment()
    return Subject(
        key=WorkloadKey(WorkloadKind.DEPLOYMENT, NAMESPACE, "web"),
        obj=obj,
        seen=observation(obj, models={}, facts=None),
    )


def record(template: dict[str, Any]) -> Applied:
    found = applied(template)
    assert found is not None
    return found


def test_only_the_workloads_pods_that_mount_its_claim_lose_only_the_delivery_gate(kube_emulator: Any) -> None:
    kube_emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    ours = DELIVERY_SCHEDULING_GATE
    for item in (
        pod("web-new-1", owner="web-new", gates=[ours], claim=CLAIM),
        pod("web-new-2", owner="web-new", gates=[OTHER_GATE, ours], claim=CLAIM),
        pod("web-old-1", owner="web-old", gates=[ours], claim=None),
        pod("webby-1", owner="webby-x", gates=[ours], claim=CLAIM),
    ):
        kube_emulator.cluster.apply(item)
    workloads = Workloads(kube_emulator.api_client())

    shared = record(rewrite({"spec": {}}, claim=CLAIM, models=[DeliveredModel("llama", LLAMA.digest)]))
    assert ungate_pods(workloads=workloads, subject=subject(), delivers=shared) is None

    assert gates_of(kube_emulator) == {
        "web-new-1": [],
        "web-new-2": [OTHER_GATE],
        "web-old-1": [ours],  # an older template's Pod would start without its models
        "webby-1": [ours],  # another Deployment's Pod, though its labels match
    }

    # The workload no longer asks for models: every Pod of its own goes.
    assert ungate_pods(workloads=workloads, subject=subject(), delivers=None) is None
    assert gates_of(kube_emulator)["web-old-1"] == []
    assert gates_of(kube_emulator)["webby-1"] == [ours]


def test_in_node_cache_mode_only_pods_with_the_recorded_volumes_and_digests_lose_the_gate(
    kube_emulator: Any,
) -> None:
    kube_emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    ours = DELIVERY_SCHEDULING_GATE
    earlier = CachedModel(LLAMA.key, "sha256:" + "b2" * 32)
    for item in (
        pod("web-new-1", owner="web-new", gates=[ours], cached=LLAMA),
        pod("web-republished-1", owner="web-older", gates=[ours], cached=earlier),
        pod("web-old-1", owner="web-old", gates=[ours]),
        pod("web-shared-1", owner="web-shared", gates=[ours], claim=CLAIM),
    ):
        kube_emulator.cluster.apply(item)
    workloads = Workloads(kube_emulator.api_client())
    cached = record(
        rewrite_for_node_cache({"spec": {}}, models=[LLAMA], node_selector={NODE_CACHE_READY_LABEL: "true"})
    )

    assert ungate_pods(workloads=workloads, subject=subject(), delivers=cached) is None

    assert gates_of(kube_emulator) == {
        "web-new-1": [],
        "web-republished-1": [ours],  # the model's earlier artifact: not what the template delivers
        "web-old-1": [ours],
        "web-shared-1": [ours],  # mounts a claim, not the node cache
    }


def test_a_selector_object_becomes_the_label_selector_query() -> None:
    selector = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["x"]},
            {"key": "team", "operator": "Exists"},
        ],
    }
    assert label_selector(selector) == "a=1,b=2,tier in (web,api),!canary,zone notin (x),team"
    assert label_selector({}) is None


def test_a_volume_the_cache_has_not_seen_is_read_before_the_claim_is_called_lost(kube_emulator: Any) -> None:
    kube_emulator.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "hostPath": {"path": "/tmp/pv-1"},
            },
        }
    )
    api = kube_emulator.api_client()
    informers = DeliveryInformers(api)  # not started: its caches are empty
    observer = SharedPVCDelivery(
        api,
        informers=informers,
        settings=SharedPVCSettings(api_url="http://127.0.0.1:1"),
        storage_class=lambda: ClassChoice(None),
        materializer_template=dict,
    )

    def bound_to(volume: str) -> dict[str, Any]:
        return {"metadata": {"name": CLAIM}, "spec": {"volumeName": volume}, "status": {"phase": "Bound"}}

    assert observer.volume_exists(bound_to("pv-1"))
    assert not observer.volume_exists(bound_to("pv-gone"))
    assert observer.volume_exists({"metadata": {"name": CLAIM}, "spec": {}, "status": {"phase": "Pending"}})
