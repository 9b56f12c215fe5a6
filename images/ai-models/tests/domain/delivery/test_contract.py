"""The consumer contract: what the annotations of a top-level workload ask for, and what is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ai_models.domain.delivery.contract import (
    DeliveryRequest,
    InvalidSpec,
    RequestedModel,
    Workload,
    WorkloadKind,
    ignored,
    parse,
    pod_template,
)
from ai_models.domain.delivery.template import DeliveredModel, rewrite
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_DIR,
    MODELS_VARIABLE,
    MODULE_NAMESPACE,
    SHARED_PVC_VOLUME,
    ModelKind,
)

DIGEST = "sha256:" + "ab" * 32
POD_SPEC: dict[str, Any] = {"containers": [{"name": "server", "image": "vllm"}]}


def workload(kind: str = "Deployment", namespace: str = "team-a", **annotations: str) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": copy.deepcopy(POD_SPEC)}
    spec: dict[str, Any] = (
        {"jobTemplate": {"spec": {"template": template}}} if kind == "CronJob" else {"template": template}
    )
    return {
        "kind": kind,
        "metadata": {"name": "web", "namespace": namespace, "uid": "u-1", "annotations": annotations},
        "spec": spec,
    }


def annotated(**values: str) -> dict[str, Any]:
    names = {"model": MODEL_ANNOTATION, "clustermodel": CLUSTER_MODEL_ANNOTATION}
    return workload(**{names[key]: value for key, value in values.items()})


def problems(obj: dict[str, Any]) -> str:
    result = parse(obj)
    assert isinstance(result, InvalidSpec), result
    return result.message


def test_models_and_cluster_models_are_read_from_both_annotations_in_name_order() -> None:
    result = parse(annotated(model="qwen, llama", clustermodel="bge"))

    assert result == DeliveryRequest(
        Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", "u-1"),
        (
            RequestedModel(ModelKey(ModelKind.CLUSTER_MODEL, "", "bge")),
            RequestedModel(ModelKey(ModelKind.MODEL, "team-a", "llama")),
            RequestedModel(ModelKey(ModelKind.MODEL, "team-a", "qwen")),
        ),
    )


@pytest.mark.parametrize("kind", list(WorkloadKind))
def test_every_supported_kind_is_a_consumer_with_its_own_template_path(kind: WorkloadKind) -> None:
    obj = workload(kind, **{MODEL_ANNOTATION: "qwen"})

    assert isinstance(parse(obj), DeliveryRequest)
    assert pod_template(obj)["spec"] == POD_SPEC
    expected = "/spec/jobTemplate/spec/template" if kind is WorkloadKind.CRON_JOB else "/spec/template"
    assert kind.template_pointer == expected


def test_a_workload_without_the_annotations_asks_for_nothing() -> None:
    assert parse(workload()) is None


def test_workloads_in_the_module_namespace_are_ignored() -> None:
    assert ignored(MODULE_NAMESPACE)
    assert not ignored("team-a")
    assert parse(workload(namespace=MODULE_NAMESPACE, **{MODEL_ANNOTATION: "qwen"})) is None


@pytest.mark.parametrize(
    "namespace", ["kube-system", "kube-public", "kube-node-lease", "d8-system", "d8-monitoring"]
)
def test_workloads_in_the_clusters_and_deckhouses_namespaces_are_ignored(namespace: str) -> None:
    assert ignored(namespace)
    assert parse(workload(namespace=namespace, **{MODEL_ANNOTATION: "qwen"})) is None


@pytest.mark.parametrize("namespace", ["kube-team", "team-d8-a", "d8", "default"])
def test_a_namespace_that_only_looks_like_a_system_one_is_served(namespace: str) -> None:
    assert not ignored(namespace)


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"model": ""}, [MODEL_ANNOTATION, "empty model name", "separated by commas"]),
        ({"model": "qwen,,llama"}, [MODEL_ANNOTATION, "empty model name"]),
        ({"clustermodel": "bge,"}, [CLUSTER_MODEL_ANNOTATION, "empty model name"]),
        ({"model": "Qwen_3"}, [MODEL_ANNOTATION, "'Qwen_3'", "DNS-1123", "kubectl get models"]),
        ({"model": "a/b"}, [MODEL_ANNOTATION, "'a/b'", "not a Model name"]),
        ({"clustermodel": "x" * 254}, [CLUSTER_MODEL_ANNOTATION, "not a ClusterModel name"]),
        (
            {"model": "qwen,qwen"},
            [MODEL_ANNOTATION, "'qwen' twice", f"{MODELS_DIR}/qwen", "name each model once"],
        ),
        (
            {"model": "qwen", "clustermodel": "qwen"},
            [CLUSTER_MODEL_ANNOTATION, f"and also in {MODEL_ANNOTATION}", f"{MODELS_DIR}/qwen"],
        ),
    ],
)
def test_a_bad_reference_is_invalid_spec_naming_the_annotation_and_the_fix(
    values: dict[str, str], names: list[str]
) -> None:
    message = problems(annotated(**values))

    for text in names:
        assert text in message


def test_every_problem_is_reported_at_once() -> None:
    result = parse(annotated(model="qwen,,Bad", clustermodel="qwen"))

    assert isinstance(result, InvalidSpec)
    assert len(result.problems) == 3


@pytest.mark.parametrize(
    "path",
    [
        MODELS_DIR,
        f"{MODELS_DIR}/",
        f"{MODELS_DIR}/qwen",
        f"{MODELS_DIR}/qwen/sub",
        "/data/modelcache//models",
    ],
)
def test_a_user_mount_at_the_models_directory_or_under_it_is_invalid_spec(path: str) -> None:
    obj = annotated(model="qwen")
    obj["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "cache", "mountPath": path}]

    message = problems(obj)

    assert "container server mounts the volume cache" in message
    assert "mount it elsewhere" in message


def test_a_user_mount_beside_the_models_directory_is_fine() -> None:
    obj = annotated(model="qwen")
    obj["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "cache", "mountPath": "/data/modelcache"},
        {"name": "other", "mountPath": f"{MODELS_DIR}-old"},
    ]

    assert isinstance(parse(obj), DeliveryRequest)


def test_an_init_container_with_the_models_variable_is_invalid_spec() -> None:
    obj = annotated(model="qwen")
    obj["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "warmup", "env": [{"name": MODELS_VARIABLE, "value": "[]"}]}
    ]

    message = problems(obj)

    assert f"container warmup sets the variable {MODELS_VARIABLE}" in message


def test_a_user_volume_with_the_modules_volume_name_is_invalid_spec() -> None:
    obj = annotated(model="qwen")
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": SHARED_PVC_VOLUME, "emptyDir": {}}]

    assert f"its own volume named {SHARED_PVC_VOLUME}" in problems(obj)


def test_what_the_module_added_earlier_is_not_a_conflict() -> None:
    obj = annotated(model="qwen")
    template = obj["spec"]["template"]
    obj["spec"]["template"] = rewrite(
        template, claim="ai-models-web-1", models=[DeliveredModel("qwen", DIGEST)]
    )

    assert isinstance(parse(obj), DeliveryRequest)
