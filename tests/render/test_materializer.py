"""The materialize Job as the controller builds it from the Helm-rendered pod template.

The controller reads the template from the ConfigMap ai-models-materializer-template and runs the
Job in the workload's namespace, so the template must carry nothing of the module namespace: no
ServiceAccount token, no object-store credentials or settings, no pull secret, no placement. These
tests take the rendered ConfigMap, build a Job with the controller's own code
(`controller.delivery.jobs.materialize_job`), and hold it to the schema and the reviewer checks,
except the placement and pull-secret rules that follow from running beside the workload.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import pytest
import yaml

from ai_models.controller.delivery.jobs import (
    CLAIM_MOUNT,
    MATERIALIZER_CONTAINER,
    materialize_job,
    registry_secret_name,
    token_secret_name,
)
from ai_models.controller.jobs.builder import FINAL_EXIT_CODES, JobLimits
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.materialization import MaterializationRequest, RequestedArtifact
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    API_INTERNAL_URL,
    MATERIALIZER_TEMPLATE_CONFIGMAP,
    MODULE_NAMESPACE,
    SHARED_PVC_VOLUME,
    MaterializeVariable,
    ModelKind,
)
from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, review
from support.pod_security import restricted_violations
from support.render import RenderedChart
from support.scenarios import Scenario, generated_certificate, load_scenarios, scenario

NAMESPACE = MODULE_NAMESPACE
SCENARIOS = load_scenarios()
WORKLOAD = Workload(WorkloadKind.DEPLOYMENT, "team-a", "server", "4a1c0e52-8f1e-4b43-9d0f-0f6c1b8f3e21")
CLAIM = "ai-models-deployment-server-1a2b3c4d"
DIGEST = "sha256:" + "cd" * 32
CA_PEM = generated_certificate(("ai-models-api.d8-ai-models.svc",)).ca_pem
REQUEST = MaterializationRequest(
    api_url=API_INTERNAL_URL,
    target_dir=CLAIM_MOUNT,
    artifacts=(RequestedArtifact.of("llama", ModelKey(ModelKind.MODEL, "team-a", "llama"), DIGEST),),
)
# Review findings that follow from the Job running in the workload's namespace, where the claim
# can be mounted: not in the module namespace, no system placement, the controller's own copy of
# the pull secret instead of the module namespace's.
BESIDE_THE_WORKLOAD = (
    "namespaced object must be in d8-ai-models",
    "nodeSelector must be ",
    "tolerations must include ",
    "imagePullSecrets must include ",
)
# What would tie the pod to the object store or the module namespace.
STORE_MARKERS = ("AWS_", "AI_MODELS_S3_", "AI_MODELS_STORE_", "AI_MODELS_CAPACITY_", "ai-models-artifacts")


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def template_of(chart: RenderedChart) -> dict[str, Any]:
    config_map = chart.get("ConfigMap", MATERIALIZER_TEMPLATE_CONFIGMAP, NAMESPACE)
    template: dict[str, Any] = yaml.safe_load(config_map["data"]["template.yaml"])
    return template


def job_for(chart: RenderedChart, *, pull_secret: bool = True) -> dict[str, Any]:
    return materialize_job(
        template_of(chart),
        workload=WORKLOAD,
        claim=CLAIM,
        claim_uid="9f0d7c1e-2b3a-4c5d-8e9f-0a1b2c3d4e5f",
        request=REQUEST,
        limits=JobLimits(backoff_limit=2, deadline_seconds=3600),
        pull_secret=pull_secret,
    )


@pytest.mark.parametrize("item", SCENARIOS, ids=lambda item: item.name)
def test_the_job_passes_schema_and_reviewer_checks_but_for_running_beside_the_workload(
    item: Scenario,
) -> None:
    job = job_for(rendered(item.name))
    validate_object(job)
    findings = review([job], ClusterExpectations.from_values(item.values()))
    prefix = f"Job/{WORKLOAD.namespace}/{CLAIM}: "
    assert all(finding.startswith(prefix) for finding in findings), findings
    unexpected = [
        finding for finding in findings if not finding.removeprefix(prefix).startswith(BESIDE_THE_WORKLOAD)
    ]
    assert unexpected == []


def test_the_reviewer_sees_the_deviations_the_template_makes_on_purpose() -> None:
    # The exemption above must not hide more than it says: in the typical cluster exactly these.
    findings = review(
        [job_for(rendered("minimal"))], ClusterExpectations.from_values(scenario("minimal").values())
    )
    kinds = sorted({next(p for p in BESIDE_THE_WORKLOAD if p in finding) for finding in findings})
    assert kinds == sorted(BESIDE_THE_WORKLOAD)


@pytest.mark.parametrize("item", SCENARIOS, ids=lambda item: item.name)
def test_the_template_carries_nothing_of_the_object_store(item: Scenario) -> None:
    config_map = rendered(item.name).get("ConfigMap", MATERIALIZER_TEMPLATE_CONFIGMAP, NAMESPACE)
    text = config_map["data"]["template.yaml"]
    assert [marker for marker in STORE_MARKERS if marker in text] == []
    (container,) = template_of(rendered(item.name))["spec"]["containers"]
    assert "envFrom" not in container
    assert [entry["name"] for entry in container["env"]] == ["AI_MODELS_LOG_LEVEL", "AI_MODELS_LOG_FORMAT"]
    assert all("valueFrom" not in entry for entry in container["env"])
    assert container["env"][0]["value"] == item.values()["aiModels"]["logLevel"]


def test_the_template_is_one_restricted_container_of_the_module_image() -> None:
    chart = rendered("minimal")
    template = template_of(chart)
    assert template["metadata"]["labels"] == {
        "app": "ai-models-materializer",
        "module": "ai-models",
        "heritage": "deckhouse",
    }
    pod = template["spec"]
    (container,) = pod["containers"]
    controller = chart.get("Deployment", "ai-models-controller", NAMESPACE)["spec"]["template"]["spec"]
    assert container["name"] == MATERIALIZER_CONTAINER
    assert container["image"] == controller["containers"][0]["image"]
    assert [container["command"], container["args"]] == [["ai-models"], ["materialize"]]
    assert container["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # fsGroup: the files it writes into the claim stay the workload's group; the claim's tree is
    # chowned only when its root does not match yet, not on every Job.
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 64535,
        "runAsGroup": 64535,
        "fsGroup": 64535,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert restricted_violations(pod) == []
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "50Mi"},
        "limits": {"memory": "256Mi"},
    }
    assert "volumeMounts" not in container
    assert "volumes" not in pod


def test_the_pod_has_no_identity_placement_or_pull_secret_of_the_module_namespace() -> None:
    pod = template_of(rendered("custom-placement"))["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod
    assert pod["enableServiceLinks"] is False
    assert pod["restartPolicy"] == "Never"
    assert pod["priorityClassName"] == "cluster-low"
    # Placement is wherever the workload's claim can be mounted, whatever the module's own is.
    assert scenario("custom-placement").values()["aiModels"].get("nodeSelector")
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert key not in pod, key
    # Only the admin names pull secrets for the workload's namespace (delivery.materializer).
    assert "imagePullSecrets" not in template_of(rendered("minimal"))["spec"]


def test_the_controller_adds_the_claim_the_request_and_the_termination_message() -> None:
    job = job_for(rendered("minimal"))
    assert job["metadata"]["namespace"] == WORKLOAD.namespace
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": SHARED_PVC_VOLUME, "persistentVolumeClaim": {"claimName": CLAIM}}]
    # Only the copy beside the Job: the workload's namespace has no module-registry Secret.
    assert pod["imagePullSecrets"] == [{"name": registry_secret_name(CLAIM)}]
    (container,) = pod["containers"]
    assert container["volumeMounts"] == [{"name": SHARED_PVC_VOLUME, "mountPath": CLAIM_MOUNT}]
    assert container["terminationMessagePath"] == REQUEST.termination_message_path
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    env = {entry["name"]: entry for entry in container["env"]}
    assert env[MaterializeVariable.TOKEN.value]["valueFrom"]["secretKeyRef"]["name"] == token_secret_name(
        CLAIM
    )
    literal = {name: entry["value"] for name, entry in env.items() if "value" in entry}
    # What the materializer reads back is what the controller asked for.
    assert env[MaterializeVariable.CA_BUNDLE.value]["valueFrom"]["secretKeyRef"]["name"] == token_secret_name(
        CLAIM
    )
    from_secret = {MaterializeVariable.TOKEN.value: "t", MaterializeVariable.CA_BUNDLE.value: CA_PEM}
    parsed = MaterializationRequest.from_env({**literal, **from_secret})
    assert parsed == REQUEST
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    assert rule["onExitCodes"]["containerName"] == container["name"]
    assert rule["onExitCodes"]["values"] == list(FINAL_EXIT_CODES)


def test_the_template_follows_the_log_level_setting() -> None:
    item = dataclasses.replace(scenario("minimal"), name="debug", settings={"logLevel": "Debug"})
    (container,) = template_of(item.render())["spec"]["containers"]
    assert {entry["name"]: entry["value"] for entry in container["env"]}["AI_MODELS_LOG_LEVEL"] == "Debug"


MIRROR = "mirror.example.com:5000/deckhouse/ai-models"


def controller_env(chart: RenderedChart) -> dict[str, Any]:
    controller = chart.get("Deployment", "ai-models-controller", NAMESPACE)["spec"]["template"]["spec"]
    return {entry["name"]: entry.get("value") for entry in controller["containers"][0]["env"]}


def module_image(chart: RenderedChart) -> str:
    controller = chart.get("Deployment", "ai-models-controller", NAMESPACE)["spec"]["template"]["spec"]
    image: str = controller["containers"][0]["image"]
    return image


def test_by_default_the_controller_copies_the_module_pull_secret_beside_each_job() -> None:
    chart = rendered("minimal")
    assert controller_env(chart)["AI_MODELS_DELIVERY_REGISTRY_SECRET"] == "ai-models-module-registry"
    assert template_of(chart)["spec"]["containers"][0]["image"] == module_image(chart)


def test_a_mirror_runs_the_module_digest_and_the_controller_copies_no_pull_secret() -> None:
    chart = rendered("delivery-materializer-mirror")
    digest = module_image(chart).partition("@")[2]
    assert digest.startswith("sha256:")

    (container,) = template_of(chart)["spec"]["containers"]
    assert container["image"] == f"{MIRROR}@{digest}"
    # No variable, so the controller reads no Secret and copies none (controller/delivery/wiring).
    assert "AI_MODELS_DELIVERY_REGISTRY_SECRET" not in controller_env(chart)
    # The module's own pods still pull with the module's Secret, in the module namespace.
    assert module_image(chart) != container["image"]


def test_the_admins_pull_secrets_are_the_only_ones_of_a_mirrored_job() -> None:
    chart = rendered("delivery-materializer-mirror")
    assert template_of(chart)["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}]
    job = job_for(chart, pull_secret=False)
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "mirror-pull"}]
