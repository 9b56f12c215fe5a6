"""The workload admission handler in NodeCache mode: Ready models that fit the cache size get the
complete template at CREATE without the gate (nothing to wait for before scheduling), anything else
is gated with a warning that says why; no claim is ever read; an UPDATE that removes the annotations
strips, one that changes nothing changes nothing. And in SharedPVC mode, a template with its own
volume of the module's CSI driver is gated with the fix in the warning."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch

from ai_models.controller.delivery.admission import WorkloadAdmission
from ai_models.controller.delivery.node_cache import NodeCacheAdmission
from ai_models.controller.delivery.shared_pvc import SharedPVCAdmission, SharedPVCSettings
from ai_models.controller.delivery.strategy import Unreadable
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.placement import NodeCacheSeen
from ai_models.domain.delivery.template import applied, cache_volumes, gated, node_cache_volume
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_SCHEDULING_GATE,
    MODEL_ANNOTATION,
    MODELS_DIR,
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    ModelKind,
)

DIGEST = "sha256:" + "a1" * 32
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
GIB = 1024**3
GPU = {"node-role.example.com/gpu": ""}


def ready(size: int = GIB) -> dict[str, Any]:
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "Model",
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "status": {"phase": "Ready", "artifact": {"digest": DIGEST, "sizeBytes": size}},
    }


def deployment(annotations: Mapping[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", **meta, "annotations": dict(annotations or {MODEL_ANNOTATION: "qwen"})},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
            },
        },
    }


def review(obj: Mapping[str, Any], *, operation: str = "CREATE") -> dict[str, Any]:
    return {"uid": "u1", "operation": operation, "namespace": "team-a", "object": copy.deepcopy(dict(obj))}


class Cluster:
    """What the handler may read in NodeCache mode: models by key; a claim read fails the test."""

    def __init__(
        self, models: Mapping[ModelKey, Mapping[str, Any]] | None = None, *, failing: bool = False
    ) -> None:
        self.models = dict(models or {})
        self.failing = failing
        self.reads: list[str] = []

    def model(self, key: ModelKey) -> Mapping[str, Any] | None:
        self.reads.append(str(key))
        if self.failing:
            raise Unreadable(f"{key.describe()}: the API server answered 503")
        return self.models.get(key)

    def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        raise AssertionError(f"NodeCache admission read the claim {namespace}/{name}")

    def admission(self, *, size: int | None = 10 * GIB) -> WorkloadAdmission:
        return WorkloadAdmission(
            read_model=self.model,
            strategy=NodeCacheAdmission(settings=NodeCacheSeen(selector=GPU, size_bytes=size)),
        )


def admitted(
    cluster: Cluster, request: dict[str, Any], *, size: int | None = 10 * GIB
) -> tuple[dict[str, Any], tuple[str, ...]]:
    answer = cluster.admission(size=size)(request)
    assert answer.allowed
    obj = jsonpatch.apply_patch(request["object"], list(answer.patch)) if answer.patch else request["object"]
    return obj, tuple(answer.warnings)


def template_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = obj["spec"]["template"]
    return template


def test_ready_models_get_the_complete_template_at_create_without_the_gate_or_a_warning() -> None:
    cluster = Cluster({QWEN: ready()})

    obj, warnings = admitted(cluster, review(deployment()))

    template = template_of(obj)
    record = applied(template)
    assert record is not None
    assert record.mode is DeliveryMode.NODE_CACHE
    assert not gated(template)
    assert cache_volumes(template) == {(node_cache_volume(QWEN), DIGEST)}
    assert template["spec"]["nodeSelector"] == {**GPU, NODE_CACHE_READY_LABEL: "true"}
    mounts = template["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [{"name": node_cache_volume(QWEN), "mountPath": f"{MODELS_DIR}/qwen", "readOnly": True}]
    assert warnings == ()
    assert cluster.reads == [str(QWEN)]


def test_an_object_without_a_name_yet_is_admitted_complete_no_claim_name_is_needed() -> None:
    unnamed = deployment(generateName="web-")
    del unnamed["metadata"]["name"]

    obj, warnings = admitted(Cluster({QWEN: ready()}), review(unnamed))

    assert applied(template_of(obj)) is not None
    assert not gated(template_of(obj))
    assert warnings == ()


def test_a_model_not_ready_gates_and_says_why() -> None:
    publishing = ready()
    publishing["status"] = {"phase": "Publishing"}

    obj, warnings = admitted(Cluster({QWEN: publishing}), review(deployment()))

    assert gated(template_of(obj))
    assert applied(template_of(obj)) is None
    assert DELIVERY_SCHEDULING_GATE in warnings[0]
    assert "a model it names is not Ready" in warnings[0]


def test_models_larger_than_the_cache_size_are_gated_with_the_sizes_in_the_warning() -> None:
    obj, warnings = admitted(Cluster({QWEN: ready(size=20 * GIB)}), review(deployment()))

    assert gated(template_of(obj))
    assert "20.0 GiB" in warnings[0]
    assert "delivery.nodeCache.size is 10.0 GiB" in warnings[0]


def test_without_a_size_setting_the_size_does_not_gate() -> None:
    obj, warnings = admitted(Cluster({QWEN: ready(size=20 * GIB)}), review(deployment()), size=None)

    assert not gated(template_of(obj))
    assert warnings == ()


def test_a_conflicting_node_selector_is_gated_and_the_warning_names_the_key() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"node-role.example.com/gpu": "a100"}

    admitted_obj, warnings = admitted(Cluster({QWEN: ready()}), review(obj))

    assert gated(template_of(admitted_obj))
    assert template_of(admitted_obj)["spec"]["nodeSelector"] == {"node-role.example.com/gpu": "a100"}
    assert "node-role.example.com/gpu='a100'" in warnings[0]


def test_a_failed_read_gates_instead_of_refusing() -> None:
    obj, warnings = admitted(Cluster(failing=True), review(deployment()))

    assert gated(template_of(obj))
    assert "could not read" in warnings[0]


def test_an_update_that_changes_nothing_patches_nothing_and_one_removing_the_annotations_strips() -> None:
    cluster = Cluster({QWEN: ready()})
    delivered, _ = admitted(cluster, review(deployment()))

    answer = cluster.admission()(review(delivered, operation="UPDATE"))
    assert not answer.patch

    without = copy.deepcopy(delivered)
    without["metadata"]["annotations"] = {}
    obj, warnings = admitted(cluster, review(without, operation="UPDATE"))
    assert template_of(obj) == template_of(deployment())
    assert warnings == ()


def test_in_shared_pvc_mode_a_hand_written_node_cache_volume_is_gated_with_the_fix_and_no_read() -> None:
    cluster = Cluster({QWEN: ready()})
    obj = deployment()
    obj["spec"]["template"]["spec"]["volumes"] = [
        {"name": "weights", "csi": {"driver": NODE_CACHE_DRIVER, "volumeAttributes": {}}}
    ]
    shared_pvc = WorkloadAdmission(
        read_model=cluster.model,
        strategy=SharedPVCAdmission(read_claim=cluster.claim, policy=SharedPVCSettings(api_url="").policy),
    )

    answer = shared_pvc(review(obj))
    admitted_obj = jsonpatch.apply_patch(review(obj)["object"], list(answer.patch))

    assert gated(template_of(admitted_obj))
    assert applied(template_of(admitted_obj)) is None
    assert "switch delivery.mode to NodeCache" in answer.warnings[0]
    assert cluster.reads == []
