"""The publication Job as the controller builds it from the Helm-rendered pod template.

The controller reads the template from the ConfigMap ai-models-publisher-template; these tests
take that rendered ConfigMap, build a Job with the controller's own code, and hold the Job to
the same schema and reviewer checks as every Deployment the chart renders.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ai_models.controller.jobs.builder import FINAL_EXIT_CODES, JobLimits
from ai_models.controller.models.jobs import (
    DIGEST_ANNOTATION,
    TERMINATION_MESSAGE_PATH,
    publication_env,
    publication_job,
    token_env,
)
from ai_models.domain.publication.request import UploadPublication
from ai_models.domain.storage.ledger import Owner
from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, review
from support.scenarios import Scenario, load_scenarios, scenario

NAMESPACE = "d8-ai-models"
OWNER = Owner(kind="Model", namespace="team-a", name="llama", uid="0b4f3c1e-5a1d-4f5e-9a53-2a8b7c7d1e11")
DIGEST = "sha256:" + "ab" * 32
SCENARIOS = load_scenarios()


def template_of(item: Scenario) -> dict[str, Any]:
    config_map = item.render().get("ConfigMap", "ai-models-publisher-template", NAMESPACE)
    template: dict[str, Any] = yaml.safe_load(config_map["data"]["template.yaml"])
    return template


def job_for(item: Scenario) -> dict[str, Any]:
    env = publication_env(OWNER, digest=DIGEST, source=UploadPublication())
    env.append(token_env(OWNER))
    return publication_job(
        template_of(item),
        owner=OWNER,
        namespace=NAMESPACE,
        digest=DIGEST,
        env=env,
        limits=JobLimits(backoff_limit=3, deadline_seconds=3600),
    )


@pytest.mark.parametrize("item", SCENARIOS, ids=lambda item: item.name)
def test_publication_job_passes_schema_and_reviewer_checks(item: Scenario) -> None:
    job = job_for(item)
    validate_object(job)
    assert review([job], ClusterExpectations.from_values(item.values())) == []


def test_job_runs_the_module_image_as_the_publisher_with_the_store_settings() -> None:
    item = scenario("minimal")
    job = job_for(item)
    pod = job["spec"]["template"]["spec"]
    controller = item.render().get("Deployment", "ai-models-controller", NAMESPACE)["spec"]["template"][
        "spec"
    ]
    (publisher,) = pod["containers"]
    assert publisher["image"] == controller["containers"][0]["image"]
    assert [publisher["command"], publisher["args"]] == [["ai-models"], ["publish"]]
    assert pod["serviceAccountName"] == "publisher"
    assert pod["restartPolicy"] == "Never"
    env = {item["name"]: item for item in publisher["env"]}
    controller_env = {item["name"]: item for item in controller["containers"][0]["env"]}
    for name in (
        "AI_MODELS_STORE_URL",
        "AI_MODELS_S3_ENDPOINT",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ):
        assert env[name] == controller_env[name]
    assert env["AI_MODELS_PUBLISH_DIGEST"]["value"] == DIGEST
    assert env["AI_MODELS_PUBLISH_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == f"publish-{OWNER.uid}-token"
    assert publisher["terminationMessagePath"] == TERMINATION_MESSAGE_PATH
    assert env["AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH"]["value"] == TERMINATION_MESSAGE_PATH
    assert publisher["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_job_is_labelled_for_its_owner_and_fails_fast_on_a_final_outcome() -> None:
    job = job_for(scenario("minimal"))
    labels = job["metadata"]["labels"]
    assert labels["ai.deckhouse.io/owner-uid"] == OWNER.uid
    assert labels["app.kubernetes.io/component"] == "publication"
    assert job["spec"]["template"]["metadata"]["labels"]["ai.deckhouse.io/owner-uid"] == OWNER.uid
    assert job["metadata"]["annotations"][DIGEST_ANNOTATION] == DIGEST
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["values"] == list(FINAL_EXIT_CODES)
    assert job["spec"]["backoffLimit"] == 3


def test_controller_mounts_the_template_it_is_told_to_read() -> None:
    rendered = scenario("minimal").render()
    spec = rendered.get("Deployment", "ai-models-controller", NAMESPACE)["spec"]["template"]["spec"]
    (container,) = [item for item in spec["containers"] if item["name"] == "controller"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    mount = next(item for item in container["volumeMounts"] if item["name"] == "publisher-template")
    assert env["AI_MODELS_PUBLISH_POD_TEMPLATE_FILE"] == mount["mountPath"] + "/template.yaml"
    volume = next(item for item in spec["volumes"] if item["name"] == "publisher-template")
    assert volume["configMap"]["name"] == "ai-models-publisher-template"
