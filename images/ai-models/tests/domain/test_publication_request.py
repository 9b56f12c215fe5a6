"""The controller-to-Job contract: one typed request, written by `to_env()`, read by `from_env()`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.models.jobs import (
    publication_env,
    publication_job,
    token_env,
    token_secret,
)
from ai_models.domain.publication.request import (
    AIModelsPublication,
    FileSpec,
    HuggingFacePublication,
    PublicationRequest,
    PublicationRequestError,
    UploadPublication,
    hub_token_value,
    token_secret_name,
)
from ai_models.domain.storage.ledger import Owner
from ai_models.names import MODULE_NAMESPACE, ModelKind, PublishVariable

MODEL = Owner(
    kind=ModelKind.MODEL.value, namespace="team-a", name="qwen", uid="6f1c2a44-0d3e-4b7f-9c1a-2e5d8b7a9f10"
)
CLUSTER_MODEL = Owner(
    kind=ModelKind.CLUSTER_MODEL.value,
    namespace="",
    name="shared",
    uid="0b4f3c1e-5a1d-4f5e-9a53-2a8b7c7d1e11",
)
DIGEST = "sha256:" + "ab" * 32
HUB = HuggingFacePublication(
    repository="Qwen/Qwen2.5-0.5B",
    revision="c0ffee" + "0" * 34,
    files=(
        FileSpec(path="config.json", size=600),
        FileSpec(path="model.safetensors", size=988_097_824, lfsSha256="ef" * 32),
    ),
    endpoint="https://hub.example",
)
TOKEN = "hf_not_for_plain_env"
OTHER_CLUSTER = AIModelsPublication(
    endpoint="https://ai-models.other.example",
    cluster_model="qwen-shared",
    files=(
        FileSpec(path="config.json", size=600, lfsSha256="01" * 32),
        FileSpec(path="model.safetensors", size=988_097_824, lfsSha256="ef" * 32),
    ),
    ca_bundle="-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
)


def resolved(env: Sequence[Mapping[str, Any]], secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """What the publisher's process sees: values as written, secretKeyRefs resolved as the kubelet does."""
    seen: dict[str, str] = {}
    for item in env:
        if "value" in item:
            seen[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            seen[item["name"]] = secrets[ref["name"]][ref["key"]]
    return seen


def valid_env() -> dict[str, str]:
    return resolved(PublicationRequest(owner=MODEL, digest=DIGEST, source=HUB).to_env(), {})


REQUESTS = {
    "hugging-face-model-with-token": PublicationRequest(
        owner=MODEL, digest=DIGEST, source=HUB, hub_token=True
    ),
    "hugging-face-cluster-model": PublicationRequest(owner=CLUSTER_MODEL, digest=DIGEST, source=HUB),
    "hugging-face-default-endpoint": PublicationRequest(
        owner=MODEL, digest=DIGEST, source=HuggingFacePublication(HUB.repository, HUB.revision, HUB.files)
    ),
    "upload-without-progress": PublicationRequest(
        owner=MODEL,
        digest=DIGEST,
        source=UploadPublication(),
        termination_message_path="/tmp/outcome",
        report_progress=False,
    ),
    "other-cluster-with-token-and-ca": PublicationRequest(
        owner=MODEL, digest=DIGEST, source=OTHER_CLUSTER, hub_token=True
    ),
    "other-cluster-system-cas": PublicationRequest(
        owner=CLUSTER_MODEL,
        digest=DIGEST,
        source=AIModelsPublication(OTHER_CLUSTER.endpoint, OTHER_CLUSTER.cluster_model, OTHER_CLUSTER.files),
    ),
    "upload-cluster-model": PublicationRequest(
        owner=CLUSTER_MODEL, digest=DIGEST, source=UploadPublication()
    ),
}


@pytest.mark.parametrize("request_", REQUESTS.values(), ids=REQUESTS.keys())
def test_a_request_reads_back_from_its_env_unchanged(request_: PublicationRequest) -> None:
    secrets = {token_secret_name(request_.owner): {"token": TOKEN}}

    assert PublicationRequest.from_env(resolved(request_.to_env(), secrets)) == request_


def test_the_hub_token_is_only_a_secret_reference_in_the_env() -> None:
    env = PublicationRequest(owner=MODEL, digest=DIGEST, source=HUB, hub_token=True).to_env()

    (token,) = [item for item in env if item["name"] == PublishVariable.TOKEN]
    assert token == {
        "name": PublishVariable.TOKEN.value,
        "valueFrom": {"secretKeyRef": {"name": f"publish-{MODEL.uid}-token", "key": "token"}},
    }
    assert all("valueFrom" not in item for item in env if item is not token)
    assert hub_token_value(resolved(env, {token_secret_name(MODEL): {"token": TOKEN}})) == TOKEN


def test_every_variable_is_named_in_names_and_written_once() -> None:
    written: set[str] = set()
    for source in (HUB, OTHER_CLUSTER):
        env = PublicationRequest(
            owner=MODEL, digest=DIGEST, source=source, hub_token=True, report_progress=False
        ).to_env()
        names = [item["name"] for item in env]
        assert len(names) == len(set(names))
        written |= set(names)

    assert written == {variable.value for variable in PublishVariable}


def test_the_job_the_controller_builds_carries_the_request_the_publisher_reads() -> None:
    template = {"spec": {"containers": [{"name": "publish", "image": "registry.example/ai-models:1"}]}}
    env = [*publication_env(MODEL, digest=DIGEST, source=HUB), token_env(MODEL)]
    job = publication_job(
        template,
        owner=MODEL,
        namespace=MODULE_NAMESPACE,
        digest=DIGEST,
        env=env,
        limits=JobLimits(backoff_limit=1, deadline_seconds=60),
    )
    secret = token_secret(MODEL, namespace=MODULE_NAMESPACE, token=TOKEN)
    container = job["spec"]["template"]["spec"]["containers"][0]

    seen = resolved(container["env"], {secret["metadata"]["name"]: secret["stringData"]})

    assert PublicationRequest.from_env(seen) == PublicationRequest(
        owner=MODEL, digest=DIGEST, source=HUB, hub_token=True
    )
    assert hub_token_value(seen) == TOKEN


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        (PublishVariable.DIGEST, None, "AI_MODELS_PUBLISH_DIGEST is not set"),
        (
            PublishVariable.DIGEST,
            "md5:abc",
            "AI_MODELS_PUBLISH_DIGEST must be sha256:<64 hex digits>, got 'md5:abc'",
        ),
        (PublishVariable.OWNER_UID, "", "AI_MODELS_PUBLISH_OWNER_UID is empty"),
        (
            PublishVariable.OWNER_KIND,
            "Pod",
            "AI_MODELS_PUBLISH_OWNER_KIND must be Model or ClusterModel, got 'Pod'",
        ),
        (
            PublishVariable.OWNER_NAMESPACE,
            "",
            "AI_MODELS_PUBLISH_OWNER_NAMESPACE must name the Model's namespace",
        ),
        (
            PublishVariable.OWNER_NAME,
            "m" * 254,
            "AI_MODELS_PUBLISH_OWNER_NAME has 254 characters, at most 253",
        ),
        (
            PublishVariable.SOURCE_TYPE,
            "Catalog",
            "AI_MODELS_PUBLISH_SOURCE_TYPE must be HuggingFace, Upload or AIModels, got Catalog",
        ),
        (
            PublishVariable.REPOSITORY,
            "not a repo",
            "AI_MODELS_PUBLISH_REPOSITORY must be a Hugging Face repository id",
        ),
        (PublishVariable.REVISION, None, "AI_MODELS_PUBLISH_REVISION is not set"),
        (PublishVariable.FILES, "{not json", "AI_MODELS_PUBLISH_FILES is not a JSON list of files"),
        (PublishVariable.FILES, "[]", "AI_MODELS_PUBLISH_FILES must list the files to publish"),
        (
            PublishVariable.FILES,
            '[{"path": "a.json"}, {"path": "a.json"}]',
            "AI_MODELS_PUBLISH_FILES lists a path twice",
        ),
        (PublishVariable.FILES, '[{"path": "../escape"}]', "'../escape' is not a relative"),
        (PublishVariable.REPORT_PROGRESS, "maybe", "AI_MODELS_PUBLISH_REPORT_PROGRESS must be true or false"),
    ],
)
def test_a_missing_or_garbled_variable_is_refused_naming_it(
    variable: PublishVariable, value: str | None, problem: str
) -> None:
    env = valid_env()
    if value is None:
        del env[variable.value]
    else:
        env[variable.value] = value

    with pytest.raises(PublicationRequestError) as raised:
        PublicationRequest.from_env(env)

    assert [item.variable for item in raised.value.problems] == [variable]
    assert problem in str(raised.value)


def test_a_cluster_model_request_with_a_namespace_is_refused() -> None:
    env = resolved(
        PublicationRequest(owner=CLUSTER_MODEL, digest=DIGEST, source=UploadPublication()).to_env(), {}
    )
    env[PublishVariable.OWNER_NAMESPACE.value] = "team-a"

    with pytest.raises(PublicationRequestError, match="OWNER_NAMESPACE must be empty for a ClusterModel"):
        PublicationRequest.from_env(env)


def test_every_problem_is_reported_at_once() -> None:
    env = valid_env()
    del env[PublishVariable.OWNER_UID.value]
    env[PublishVariable.DIGEST.value] = "md5:abc"
    env[PublishVariable.FILES.value] = "[]"

    with pytest.raises(PublicationRequestError) as raised:
        PublicationRequest.from_env(env)

    assert [item.variable for item in raised.value.problems] == [
        PublishVariable.OWNER_UID,
        PublishVariable.DIGEST,
        PublishVariable.FILES,
    ]


def test_variables_of_other_settings_are_ignored() -> None:
    env = {**valid_env(), "AI_MODELS_STORE_URL": "file:///data", "HOME": "/root"}

    assert PublicationRequest.from_env(env) == PublicationRequest(owner=MODEL, digest=DIGEST, source=HUB)


def other_cluster_env() -> dict[str, str]:
    return resolved(PublicationRequest(owner=MODEL, digest=DIGEST, source=OTHER_CLUSTER).to_env(), {})


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        (PublishVariable.ENDPOINT, None, "AI_MODELS_PUBLISH_ENDPOINT is not set"),
        (PublishVariable.ENDPOINT, "ftp://x", "AI_MODELS_PUBLISH_ENDPOINT must be an http(s) URL"),
        (
            PublishVariable.CLUSTER_MODEL,
            "Not_A_Name",
            "AI_MODELS_PUBLISH_CLUSTER_MODEL must be a ClusterModel",
        ),
        (
            PublishVariable.FILES,
            '[{"path": "model.safetensors", "size": 3}]',
            "AI_MODELS_PUBLISH_FILES must give the sha256 of every file",
        ),
    ],
)
def test_an_other_cluster_request_without_what_verifies_the_copy_is_refused(
    variable: PublishVariable, value: str | None, problem: str
) -> None:
    env = other_cluster_env()
    if value is None:
        del env[variable.value]
    else:
        env[variable.value] = value

    with pytest.raises(PublicationRequestError) as raised:
        PublicationRequest.from_env(env)

    assert [item.variable for item in raised.value.problems] == [variable]
    assert problem in str(raised.value)
