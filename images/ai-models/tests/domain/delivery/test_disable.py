"""What disabling the module takes back (D158): the pure rules the after-delete hook writes with,
applied here by a real RFC 6902 engine to whole objects."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.disable import GatedPod, PodAction, finalizer_patch, workload_patch
from ai_models.domain.delivery.marking import carries_module_part, label_change, label_patch
from ai_models.domain.delivery.template import (
    CachedModel,
    DeliveredModel,
    gate,
    rewrite,
    rewrite_for_node_cache,
    strip,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_TEMPLATE_LABEL,
    DELIVERY_TEMPLATE_LABEL_VALUE,
    MODEL_ANNOTATION,
    MODEL_FINALIZER,
    NODE_CACHE_READY_LABEL,
    ModelKind,
)

QWEN = DeliveredModel("qwen", "sha256:" + "a1" * 32)
CACHED = CachedModel(ModelKey(ModelKind.MODEL, "team-a", "qwen"), "sha256:" + "a1" * 32)
CLAIM = "ai-models-web-0123456789"


def users_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {
            "schedulingGates": [{"name": "example.com/quota"}],
            "initContainers": [{"name": "warmup", "image": "busybox"}],
            "containers": [
                {
                    "name": "server",
                    "image": "vllm",
                    "env": [{"name": "MODEL", "value": "$(AI_MODELS_MODELS_DIR)/qwen"}],
                    "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                },
                {"name": "sidecar", "image": "envoy"},
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "nodeSelector": {"gpu": "a100"},
        },
    }


def deployment(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "labels": {"app": "web", DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE},
            "annotations": {
                MODEL_ANNOTATION: "qwen",
                DELIVERY_REASON_ANNOTATION: "Delivered",
                DELIVERY_MESSAGE_ANNOTATION: "ready",
            },
        },
        "spec": {"replicas": 2, "template": template},
    }


def filtered(template: dict[str, Any]) -> dict[str, Any]:
    """What the hook's jqFilter keeps of a template (hooks/disable_cleanup.py)."""
    spec = template.get("spec") or {}
    kept: dict[str, Any] = {
        key: spec[key] for key in ("schedulingGates", "volumes", "nodeSelector") if spec.get(key)
    }
    for field in ("initContainers", "containers"):
        if spec.get(field):
            kept[field] = [
                {key: c[key] for key in ("name", "env", "volumeMounts") if key in c} for c in spec[field]
            ]
    return {
        "metadata": {"annotations": (template.get("metadata") or {}).get("annotations") or {}},
        "spec": kept,
    }


DELIVERED = {
    "shared_pvc": rewrite(users_template(), claim=CLAIM, models=[QWEN]),
    "shared_pvc_gated": gate(rewrite(users_template(), claim=CLAIM, models=[QWEN])),
    "gated_only": gate(users_template()),
    "node_cache": rewrite_for_node_cache(
        users_template(), models=[CACHED], node_selector={NODE_CACHE_READY_LABEL: "true"}
    ),
}


@pytest.mark.parametrize("case", sorted(DELIVERED))
@pytest.mark.parametrize("projection", [filtered, copy.deepcopy], ids=["jq-filtered", "whole"])
def test_the_workload_patch_leaves_exactly_the_users_workload(case: str, projection: Any) -> None:
    template = DELIVERED[case]
    workload = deployment(template)

    patch = workload_patch(
        WorkloadKind.DEPLOYMENT,
        template=projection(template),
        annotations=list(workload["metadata"]["annotations"]),
    )
    result = jsonpatch.apply_patch(workload, patch)

    assert result["spec"]["template"] == users_template()
    assert result["metadata"]["labels"] == {"app": "web"}
    assert result["metadata"]["annotations"] == {MODEL_ANNOTATION: "qwen"}
    assert result["spec"]["replicas"] == 2


def test_a_cron_jobs_template_is_patched_under_its_job_template() -> None:
    template = rewrite(users_template(), claim=CLAIM, models=[QWEN])
    cron = {
        "metadata": {"labels": {DELIVERY_TEMPLATE_LABEL: "true"}},
        "spec": {"jobTemplate": {"spec": {"template": template}}},
    }

    result = jsonpatch.apply_patch(cron, workload_patch(WorkloadKind.CRON_JOB, template=filtered(template)))

    assert result["spec"]["jobTemplate"]["spec"]["template"] == users_template()
    assert result["metadata"]["labels"] == {}


def test_a_reordered_container_list_makes_the_patch_fail_instead_of_touching_another_container() -> None:
    template = rewrite(users_template(), claim=CLAIM, models=[QWEN])
    patch = workload_patch(WorkloadKind.DEPLOYMENT, template=filtered(template))
    moved = deployment(copy.deepcopy(template))
    containers = moved["spec"]["template"]["spec"]["containers"]
    containers.reverse()

    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(moved, patch)


def test_a_template_without_the_modules_part_only_loses_the_label() -> None:
    workload = deployment(users_template())
    del workload["metadata"]["annotations"][DELIVERY_REASON_ANNOTATION]
    del workload["metadata"]["annotations"][DELIVERY_MESSAGE_ANNOTATION]

    patch = workload_patch(
        WorkloadKind.DEPLOYMENT, template=filtered(users_template()), annotations=[MODEL_ANNOTATION]
    )

    assert patch == [{"op": "remove", "path": "/metadata/labels/ai.deckhouse.io~1model-delivery-template"}]


def test_only_the_modules_finalizer_goes_and_each_removal_is_guarded() -> None:
    obj = {"metadata": {"finalizers": ["example.com/keep", MODEL_FINALIZER, "example.com/other"]}}

    patch = finalizer_patch(obj["metadata"]["finalizers"], MODEL_FINALIZER)

    assert jsonpatch.apply_patch(obj, patch)["metadata"]["finalizers"] == [
        "example.com/keep",
        "example.com/other",
    ]
    shifted = {"metadata": {"finalizers": [MODEL_FINALIZER, "example.com/keep", "example.com/other"]}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(shifted, patch)
    assert finalizer_patch(["example.com/keep"], MODEL_FINALIZER) == []


def test_a_gated_pod_without_module_volumes_loses_only_the_delivery_gate() -> None:
    pod = {"spec": {"schedulingGates": [{"name": "example.com/quota"}, {"name": DELIVERY_SCHEDULING_GATE}]}}
    seen = GatedPod("team-a", "web-1", ("example.com/quota", DELIVERY_SCHEDULING_GATE), module_volumes=False)

    assert seen.action is PodAction.UNGATE
    assert jsonpatch.apply_patch(pod, seen.ungate_patch())["spec"]["schedulingGates"] == [
        {"name": "example.com/quota"}
    ]


def test_a_gated_pod_with_a_module_volume_is_deleted_and_an_ungated_one_left_alone() -> None:
    assert (
        GatedPod("team-a", "web-1", (DELIVERY_SCHEDULING_GATE,), module_volumes=True).action
        is PodAction.DELETE
    )
    assert GatedPod("team-a", "web-2", ("example.com/quota",), module_volumes=True).action is PodAction.NONE


@pytest.mark.parametrize("case", sorted(DELIVERED))
def test_a_template_with_the_modules_part_wants_the_label(case: str) -> None:
    assert carries_module_part(DELIVERED[case])
    assert label_change({"app": "web"}, DELIVERED[case]) is True
    assert label_change({DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE}, DELIVERED[case]) is None


def test_a_users_template_wants_no_label() -> None:
    assert not carries_module_part(users_template())
    assert not carries_module_part(strip(DELIVERED["node_cache"]))
    assert label_change({DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE}, users_template()) is False
    assert label_change(None, users_template()) is None


@pytest.mark.parametrize(
    "labels", [None, {}, {"app": "web"}, {"app": "web", DELIVERY_TEMPLATE_LABEL: "false"}]
)
def test_the_label_patch_applies_to_any_labels_the_workload_has(labels: dict[str, str] | None) -> None:
    workload: dict[str, Any] = {"metadata": {} if labels is None else {"labels": dict(labels)}}

    result = jsonpatch.apply_patch(workload, label_patch(labels, DELIVERED["shared_pvc"]))

    assert result["metadata"]["labels"][DELIVERY_TEMPLATE_LABEL] == DELIVERY_TEMPLATE_LABEL_VALUE
    assert {k: v for k, v in result["metadata"]["labels"].items() if k != DELIVERY_TEMPLATE_LABEL} == {
        k: v for k, v in (labels or {}).items() if k != DELIVERY_TEMPLATE_LABEL
    }
