"""Models and ClusterModels with names up to the 253 characters the API allows are published, and a
publication whose Job the API server refuses says so in status and keeps no reservation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import GGML_F32, gguf_bytes, safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

client: Any = typed_client
CONFIG = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 2048}'
SMALL = repository(
    "acme/small", {"config.json": CONFIG, "model.safetensors": safetensors_bytes({"w": ("F32", (8, 8))})}
)
GGUF = gguf_bytes(
    metadata={"general.architecture": "llama", "llama.context_length": 2048},
    tensors={"w": (GGML_F32, (8, 8))},
)
LENGTHS = (63, 64, 253)


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [SMALL]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="1Gi")


def name_of(length: int, tag: str) -> str:
    """A valid object name of exactly `length` characters starting with `tag`."""
    name = (f"{tag}-" + "long-name." * 30)[: length - 1] + "z"
    assert len(name) == length
    return name


def reserved(stack: ModelStack) -> list[dict[str, Any]]:
    return [entry for entry in (stack.ledger() or {"entries": []})["entries"] if entry["state"] == "Reserved"]


def test_models_and_cluster_models_named_with_63_64_and_253_characters_publish_from_urls_and_uploads(
    stack: ModelStack,
) -> None:
    stack.api()
    stack.controller()
    objects: list[tuple[str, str | None, str]] = []  # name, namespace (None: ClusterModel), source
    for length in LENGTHS:
        for source in ("url", "upload"):
            spec: dict[str, Any] = (
                {"url": "https://huggingface.co/acme/small"} if source == "url" else {"upload": {}}
            )
            model, cluster_model = name_of(length, f"m-{source}"), name_of(length, f"c-{source}")
            stack.create_model(model, spec)
            stack.create_cluster_model(cluster_model, spec)
            objects += [(model, USER_NAMESPACE, source), (cluster_model, None, source)]

    for name, namespace, source in objects:
        if source == "upload":
            stack.wait_phase(name, "WaitForUpload", namespace=namespace, timeout=90)
            assert stack.upload(name, GGUF, namespace=namespace) == 201
    for name, namespace, _source in objects:
        status = stack.wait_phase(name, "Ready", namespace=namespace, timeout=90)
        assert status["artifact"]["digest"].startswith("sha256:")
        assert stack.events("PublicationSucceeded", name=name)

    ledger = stack.ledger() or {"entries": []}
    published = {(e["owner"]["namespace"], e["owner"]["name"]) for e in ledger["entries"]}
    assert published == {(namespace or "", name) for name, namespace, _ in objects}
    assert reserved(stack) == []
    stack.eventually(lambda: stack.jobs() == [], what="the publication Jobs removed")


CONTROLLER_CLUSTER_ROLE = "d8:ai-models:controller"


def _without_job_create(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**rule, "verbs": [verb for verb in rule["verbs"] if verb != "create"]}
        if "jobs" in (rule.get("resources") or [])
        else rule
        for rule in rules
    ]


def test_a_job_the_api_server_refuses_fails_the_model_with_the_reason_and_releases_the_reservation(
    stack: ModelStack,
) -> None:
    # Job create is granted twice: by the module namespace's Role (publications) and, in SharedPVC
    # mode, cluster-wide (materializations); both are taken away.
    rbac = client.RbacAuthorizationV1Api(stack.emulator.api_client())
    serialize = stack.emulator.api_client().sanitize_for_serialization
    role = serialize(rbac.read_namespaced_role("controller", "d8-ai-models"))["rules"]
    cluster_role = serialize(rbac.read_cluster_role(CONTROLLER_CLUSTER_ROLE))["rules"]
    rbac.patch_namespaced_role("controller", "d8-ai-models", {"rules": _without_job_create(role)})
    rbac.patch_cluster_role(CONTROLLER_CLUSTER_ROLE, {"rules": _without_job_create(cluster_role)})
    stack.controller()
    stack.eventually(
        lambda: (stack.ledger() or {}).get("confirmed") is True, what="the start-up inventory pass"
    )
    stack.create_model("refused", {"url": "https://huggingface.co/acme/small"})

    status = stack.wait_phase("refused", "Failed", timeout=90)

    condition = next(item for item in status["conditions"] if item["type"] == "ArtifactResolved")
    assert condition["reason"] == "PublicationFailed"
    uid = stack.model("refused")["metadata"]["uid"]  # type: ignore[index]
    assert (
        f"cannot create the Job d8-ai-models/publish-{uid}: the API server answered HTTP 403"
        in condition["message"]
    )
    assert "RBAC" in condition["message"]
    assert stack.events("PublicationFailed", name="refused")
    assert reserved(stack) == []
    assert stack.jobs() == []

    rbac.patch_namespaced_role("controller", "d8-ai-models", {"rules": role})
    rbac.patch_cluster_role(CONTROLLER_CLUSTER_ROLE, {"rules": cluster_role})
    stack.wait_phase("refused", "Ready", timeout=120)
    assert reserved(stack) == []


def test_a_job_that_cannot_be_built_fails_the_model_and_reserves_nothing(stack: ModelStack) -> None:
    stack.controller(AI_MODELS_PUBLISH_POD_TEMPLATE_FILE=str(stack.workdir / "missing-template.yaml"))
    stack.eventually(
        lambda: (stack.ledger() or {}).get("confirmed") is True, what="the start-up inventory pass"
    )
    stack.create_model("unbuilt", {"url": "https://huggingface.co/acme/small"})

    status = stack.wait_phase("unbuilt", "Failed", timeout=90)

    condition = next(item for item in status["conditions"] if item["type"] == "ArtifactResolved")
    assert condition["reason"] == "PublicationFailed"
    assert "ai-models-publisher-template" in condition["message"]
    assert str(stack.workdir) not in condition["message"]  # no controller-local path shown
    assert reserved(stack) == []
    assert stack.jobs() == []
