"""Publication Jobs built from the Helm-rendered pod template, and read back."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from ai_models.adapters.kube.errors import KubeError
from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.jobs.labels import label_value
from ai_models.controller.jobs.templates import PodTemplateError
from ai_models.controller.jobs.templates import load_pod_template as load_template
from ai_models.controller.models.jobs import (
    DIGEST_ANNOTATION,
    PUBLISHER_CONTAINER,
    TERMINATION_MESSAGE_PATH,
    JobApi,
    job_name,
    owner_key,
    owner_labels,
    publication_env,
    publication_job,
    token_env,
    token_secret,
)
from ai_models.domain.jobs import JobState, is_running, job_state
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.request import FileSpec, HuggingFacePublication
from ai_models.domain.storage.ledger import Owner
from ai_models.names import MODULE_NAMESPACE, PUBLISHER_TEMPLATE_CONFIGMAP, ModelKind
from support.render import render_chart
from support.values import module_values

OWNER = Owner(kind="Model", namespace="team-a", name="qwen", uid="6f1c2a44-0d3e-4b7f-9c1a-2e5d8b7a9f10")
DIGEST = "sha256:" + "ab" * 32
LIMITS = JobLimits(backoff_limit=2, deadline_seconds=7200)
SOURCE = HuggingFacePublication(
    repository="Qwen/Qwen2.5",
    revision="c0ffee" + "0" * 34,
    files=(FileSpec(path="model.safetensors", size=10, lfsSha256="ef" * 32),),
    endpoint="https://huggingface.co",
)


@pytest.fixture(scope="module")
def rendered_template_text() -> str:
    """The template as the module's Helm chart renders it into the ConfigMap the controller mounts."""
    chart = render_chart(module_values())
    text: str = chart.get("ConfigMap", "ai-models-publisher-template", MODULE_NAMESPACE)["data"][
        "template.yaml"
    ]
    return text


def load_pod_template(path: Path) -> dict[str, Any]:
    return load_template(path, container=PUBLISHER_CONTAINER, configmap=PUBLISHER_TEMPLATE_CONFIGMAP)


@pytest.fixture
def template(rendered_template_text: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "template.yaml"
    path.write_text(rendered_template_text)
    return load_pod_template(path)


def build(template: dict[str, Any]) -> dict[str, Any]:
    env = [*publication_env(OWNER, digest=DIGEST, source=SOURCE), token_env(OWNER)]
    return publication_job(
        template, owner=OWNER, namespace=MODULE_NAMESPACE, digest=DIGEST, env=env, limits=LIMITS
    )


def container(pod_spec: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [item for item in pod_spec["containers"] if item["name"] == name]
    assert len(found) == 1, found
    return found[0]


# ----- load_pod_template -------------------------------------------------------------------------------


def test_the_rendered_template_loads_with_its_publish_container(template: dict[str, Any]) -> None:
    publish = container(template["spec"], PUBLISHER_CONTAINER)
    assert publish["args"] == ["publish"]
    assert template["spec"]["serviceAccountName"] == "publisher"


def test_a_missing_template_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "template.yaml"
    with pytest.raises(PodTemplateError, match="cannot read the publisher pod template") as caught:
        load_pod_template(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "just a string\n",
        "- a\n- list\n",
        "spec:\n",
        "spec: []\n",
        "metadata: {}\n",
        "spec:\n  containers:\n",
        "spec:\n  containers: []\n",
        "spec:\n  containers: [publish]\n",
        "spec:\n  containers:\n  - name: sidecar\n    image: x\n",
    ],
    ids=[
        "empty",
        "scalar",
        "list",
        "null-spec",
        "list-spec",
        "no-spec",
        "null-containers",
        "no-containers",
        "container-not-a-mapping",
        "no-publish-container",
    ],
)
def test_a_template_without_a_publish_container_is_refused_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "template.yaml"
    path.write_text(text)
    with pytest.raises(PodTemplateError) as caught:
        load_pod_template(path)
    assert str(path) in str(caught.value)
    assert "'publish'" in str(caught.value)
    assert "ai-models-publisher-template" in str(caught.value)


def test_a_template_that_is_not_yaml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text("spec: {containers: [\n")
    with pytest.raises(PodTemplateError, match="cannot read the publisher pod template") as caught:
        load_pod_template(path)
    assert str(path) in str(caught.value)


# ----- publication_job ----------------------------------------------------------------------------------


def test_the_template_is_copied_not_changed(template: dict[str, Any]) -> None:
    before = copy.deepcopy(template)
    job = build(template)
    assert template == before
    pod_spec = job["spec"]["template"]["spec"]
    container(pod_spec, PUBLISHER_CONTAINER)["env"].append({"name": "LATER", "value": "x"})
    pod_spec["tolerations"].clear()
    job["spec"]["template"]["metadata"]["labels"]["later"] = "x"
    assert template == before  # nothing is shared with the result either


def test_the_job_identifies_its_owner_and_digest(template: dict[str, Any]) -> None:
    job = build(template)
    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    metadata = job["metadata"]
    assert metadata["name"] == job_name(OWNER) == f"publish-{OWNER.uid}"
    assert metadata["namespace"] == MODULE_NAMESPACE
    assert metadata["annotations"] == {DIGEST_ANNOTATION: DIGEST, "ai.deckhouse.io/owner-name": "qwen"}
    labels = owner_labels(OWNER)
    assert labels == {
        "module": "ai-models",
        "heritage": "deckhouse",
        "app.kubernetes.io/component": "publication",
        "ai.deckhouse.io/owner-kind": "Model",
        "ai.deckhouse.io/owner-namespace": "team-a",
        "ai.deckhouse.io/owner-name": "qwen",
        "ai.deckhouse.io/owner-uid": OWNER.uid,
    }
    template_labels = template["metadata"]["labels"]
    assert metadata["labels"] == {**template_labels, **labels}
    assert job["spec"]["template"]["metadata"]["labels"] == {**template_labels, **labels}


def test_the_owner_labels_win_over_template_labels_of_the_same_name(template: dict[str, Any]) -> None:
    template["metadata"]["labels"]["ai.deckhouse.io/owner-name"] = "from-template"
    job = build(template)
    assert job["metadata"]["labels"]["ai.deckhouse.io/owner-name"] == "qwen"
    assert job["spec"]["template"]["metadata"]["labels"]["ai.deckhouse.io/owner-name"] == "qwen"


def test_the_publication_env_is_appended_to_the_templates(template: dict[str, Any]) -> None:
    job = build(template)
    env = container(job["spec"]["template"]["spec"], PUBLISHER_CONTAINER)["env"]
    rendered = container(template["spec"], PUBLISHER_CONTAINER)["env"]
    added = env[len(rendered) :]
    assert env[: len(rendered)] == rendered
    assert added == [
        {"name": "AI_MODELS_PUBLISH_OWNER_KIND", "value": "Model"},
        {"name": "AI_MODELS_PUBLISH_OWNER_NAMESPACE", "value": "team-a"},
        {"name": "AI_MODELS_PUBLISH_OWNER_NAME", "value": "qwen"},
        {"name": "AI_MODELS_PUBLISH_OWNER_UID", "value": OWNER.uid},
        {"name": "AI_MODELS_PUBLISH_DIGEST", "value": DIGEST},
        {"name": "AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH", "value": TERMINATION_MESSAGE_PATH},
        {"name": "AI_MODELS_PUBLISH_SOURCE_TYPE", "value": "HuggingFace"},
        {"name": "AI_MODELS_PUBLISH_REPOSITORY", "value": "Qwen/Qwen2.5"},
        {"name": "AI_MODELS_PUBLISH_REVISION", "value": SOURCE.revision},
        {
            "name": "AI_MODELS_PUBLISH_FILES",
            "value": '[{"path":"model.safetensors","size":10,"lfsSha256":"' + "ef" * 32 + '"}]',
        },
        {"name": "AI_MODELS_PUBLISH_ENDPOINT", "value": "https://huggingface.co"},
        {
            "name": "AI_MODELS_PUBLISH_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": f"publish-{OWNER.uid}-token", "key": "token"}},
        },
    ]
    names = [item["name"] for item in env]
    assert len(names) == len(set(names))


def test_only_the_publish_container_is_touched(template: dict[str, Any]) -> None:
    sidecar = {"name": "sidecar", "image": "registry.example/sidecar:1", "env": [{"name": "A", "value": "1"}]}
    template["spec"]["containers"].append(copy.deepcopy(sidecar))
    template["spec"]["containers"][0].pop("env")
    job = build(template)
    pod_spec = job["spec"]["template"]["spec"]
    assert container(pod_spec, "sidecar") == sidecar
    publish = container(pod_spec, PUBLISHER_CONTAINER)
    assert publish["env"][0] == {"name": "AI_MODELS_PUBLISH_OWNER_KIND", "value": "Model"}  # none before
    assert publish["terminationMessagePath"] == TERMINATION_MESSAGE_PATH
    assert publish["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_pods_never_restart_and_final_exit_codes_fail_the_job(template: dict[str, Any]) -> None:
    template["spec"]["restartPolicy"] = "OnFailure"
    job = build(template)
    spec = job["spec"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert spec["backoffLimit"] == 2
    assert spec["activeDeadlineSeconds"] == 7200
    assert spec["podFailurePolicy"] == {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "publish", "operator": "In", "values": [1, 2]},
            }
        ]
    }


def test_the_api_accepts_the_job(template: dict[str, Any], kube_api_client: Any) -> None:
    k8s.CoreV1Api(kube_api_client).create_namespace({"metadata": {"name": MODULE_NAMESPACE}})
    batch = k8s.BatchV1Api(kube_api_client)
    job = build(template)
    batch.create_namespaced_job(MODULE_NAMESPACE, job)
    stored = kube_api_client.sanitize_for_serialization(
        batch.read_namespaced_job(job_name(OWNER), MODULE_NAMESPACE)
    )
    assert stored["spec"]["podFailurePolicy"] == job["spec"]["podFailurePolicy"]
    assert stored["metadata"]["labels"] == job["metadata"]["labels"]
    assert (
        container(stored["spec"]["template"]["spec"], PUBLISHER_CONTAINER)["env"]
        == container(job["spec"]["template"]["spec"], PUBLISHER_CONTAINER)["env"]
    )
    assert is_running(stored)


LONG_NAMES = ["m" * 63, "m" * 64, "long-name." * 25 + "abc"]  # 63, 64 and 253 characters


@pytest.mark.parametrize("name", LONG_NAMES, ids=lambda name: f"{len(name)}-characters")
@pytest.mark.parametrize("kind", [ModelKind.MODEL, ModelKind.CLUSTER_MODEL])
def test_the_api_accepts_the_job_and_secret_of_an_owner_whose_name_is_longer_than_a_label_value(
    template: dict[str, Any], kube_api_client: Any, name: str, kind: ModelKind
) -> None:
    assert len(name) in (63, 64, 253)
    owner = Owner(
        kind=kind.value, namespace="team-a" if kind is ModelKind.MODEL else "", name=name, uid=OWNER.uid
    )
    k8s.CoreV1Api(kube_api_client).create_namespace({"metadata": {"name": MODULE_NAMESPACE}})
    env = [*publication_env(owner, digest=DIGEST, source=SOURCE), token_env(owner)]
    job = publication_job(
        template, owner=owner, namespace=MODULE_NAMESPACE, digest=DIGEST, env=env, limits=LIMITS
    )
    secret = token_secret(owner, namespace=MODULE_NAMESPACE, token="hf_x")

    JobApi(kube_api_client, namespace=MODULE_NAMESPACE).create(job, secret)

    stored = kube_api_client.sanitize_for_serialization(
        k8s.BatchV1Api(kube_api_client).read_namespaced_job(job_name(owner), MODULE_NAMESPACE)
    )
    assert owner_key(stored) == ModelKey(kind, owner.namespace, name)
    label = stored["metadata"]["labels"]["ai.deckhouse.io/owner-name"]
    assert label == (name if len(name) <= 63 else label_value(name))
    assert len(label) <= 63


def test_a_derived_label_value_is_valid_and_differs_for_names_sharing_their_start() -> None:
    first, second = "x" * 100 + "-one", "x" * 100 + "-two"
    assert label_value("qwen") == "qwen"
    assert label_value("m" * 63) == "m" * 63
    for name in (first, second, "a.-" * 84, "m" * 64):
        value = label_value(name)
        assert len(value) <= 63
        assert value[0].isalnum()
        assert value[-1].isalnum()
    assert label_value(first) != label_value(second)


def test_a_job_of_an_earlier_version_maps_back_by_its_name_label() -> None:
    job = {"metadata": {"labels": owner_labels(OWNER)}}
    assert owner_key(job) == ModelKey(ModelKind.MODEL, "team-a", "qwen")
    assert owner_key({"metadata": {"labels": {"ai.deckhouse.io/owner-kind": "Deployment"}}}) is None


def test_a_refused_job_names_the_object_and_the_status_never_the_servers_text(
    template: dict[str, Any], kube_api_client: Any
) -> None:
    k8s.CoreV1Api(kube_api_client).create_namespace({"metadata": {"name": MODULE_NAMESPACE}})
    job = build(template)
    job["spec"]["template"]["metadata"]["labels"]["bad"] = "secret-looking-value-"

    with pytest.raises(KubeError) as refused:
        JobApi(kube_api_client, namespace=MODULE_NAMESPACE).create(job, None)

    assert (refused.value.kind, refused.value.status, refused.value.reason) == ("Job", 422, "Invalid")
    assert refused.value.fields == ("spec.template.labels",)
    assert not refused.value.temporary
    assert str(refused.value) == (
        f"cannot create the Job {MODULE_NAMESPACE}/{job_name(OWNER)}: the API server answered "
        "HTTP 422 Invalid in spec.template.labels"
    )


def test_the_template_survives_a_yaml_round_trip(template: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump(template))
    assert load_pod_template(path) == template


# ----- job_state and is_running ---------------------------------------------------------------------------


def conditions(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": type_, "status": status} for type_, status in pairs]}}


@pytest.mark.parametrize(
    ("job", "state"),
    [
        ({}, JobState.RUNNING),
        ({"status": None}, JobState.RUNNING),
        ({"status": {"active": 1}}, JobState.RUNNING),
        (conditions(("Complete", "True")), JobState.SUCCEEDED),
        (conditions(("SuccessCriteriaMet", "True"), ("Complete", "True")), JobState.SUCCEEDED),
        (conditions(("Failed", "True")), JobState.FAILED),
        (conditions(("FailureTarget", "True"), ("Failed", "True")), JobState.FAILED),
        (conditions(("FailureTarget", "True")), JobState.RUNNING),  # Pods still terminating
        (conditions(("Complete", "False"), ("Failed", "False")), JobState.RUNNING),
        (conditions(("Suspended", "True")), JobState.RUNNING),
    ],
)
def test_job_state_follows_the_terminal_conditions(job: dict[str, Any], state: JobState) -> None:
    assert job_state(job) is state


def test_a_job_being_deleted_or_finished_is_not_running() -> None:
    assert is_running({"metadata": {"name": "j"}})
    assert not is_running({"metadata": {"name": "j", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert not is_running({"metadata": {"name": "j"}, **conditions(("Complete", "True"))})
    assert not is_running({"metadata": {"name": "j"}, **conditions(("Failed", "True"))})
