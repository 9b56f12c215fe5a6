"""Models and ClusterModels published end to end: controller and api as real processes against the
API emulator, a fake Hub over HTTP, a moto S3 bucket, publish Jobs run by the test bed's runner."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import GGML_F32, gguf_bytes, safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

CONFIG = (
    b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
    b'"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, '
    b'"vocab_size": 256, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}'
)
WEIGHTS = safetensors_bytes(
    {"model.embed_tokens.weight": ("BF16", (256, 64)), "lm_head.weight": ("BF16", (256, 64))}
)
TINY = repository(
    "acme/tiny-llama",
    {
        "config.json": CONFIG,
        "model.safetensors": WEIGHTS,
        "tokenizer.json": b'{"version": "1.0"}',
        "pytorch_model.bin": b"pickle" * 100,
        "README.md": b"# tiny\n",
    },
)
PRIVATE = repository(
    "acme/private-llama", {"config.json": CONFIG, "model.safetensors": WEIGHTS}, private_token="hf_good"
)
NO_CONFIG = repository("acme/bare-weights", {"model.safetensors": WEIGHTS})
GGUF = gguf_bytes(
    metadata={"general.architecture": "llama", "llama.context_length": 2048, "llama.block_count": 2},
    tensors={"w": (GGML_F32, (8, 8))},
)


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [TINY, PRIVATE, NO_CONFIG]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {item["type"]: (item["status"], item["reason"]) for item in status.get("conditions") or []}


def test_a_model_from_a_hugging_face_url_is_published_and_accounted(stack: ModelStack) -> None:
    stack.controller()
    stack.create_model("tiny", {"url": "https://huggingface.co/acme/tiny-llama"})

    status = stack.wait_phase("tiny", "Ready")

    assert conditions(status) == {
        "ArtifactResolved": ("True", "ArtifactPublished"),
        "MetadataResolved": ("True", "ModelMetadataCalculated"),
        "Ready": ("True", "Ready"),
    }
    assert status["source"] == {"resolvedType": "HuggingFace", "resolvedRevision": TINY.sha}
    digest = status["artifact"]["digest"]
    prefix = f"artifacts/namespaced/{USER_NAMESPACE}/tiny/{digest.removeprefix('sha256:')}/"
    stored = stack.keys(prefix)
    assert sorted(stored) == sorted(
        prefix + name
        for name in (
            "manifest.json",
            "files/config.json",
            "files/model.safetensors",
            "files/tokenizer.json",
            "files/README.md",
        )
    )
    body = (
        stack.s3().get_object(Bucket=stack.bucket.name, Key=prefix + "files/model.safetensors")["Body"].read()
    )
    assert hashlib.sha256(body).digest() == hashlib.sha256(WEIGHTS).digest()
    assert status["artifact"]["sizeBytes"] == sum(size for key, size in stored.items() if "/files/" in key)
    assert status["resolved"]["format"] == "Safetensors"
    assert status["resolved"]["contextWindowTokens"] == 4096
    ledger = stack.ledger()
    assert ledger is not None
    [entry] = ledger["entries"]
    assert (entry["state"], entry["scope"], entry["owner"]["name"]) == ("Published", "Namespaced", "tiny")
    assert entry["sizeBytes"] == sum(stored.values())
    assert stack.events("PublicationStarted", name="tiny")
    assert stack.events("PublicationSucceeded", name="tiny")
    stack.eventually(lambda: stack.jobs() == [], what="the finished publish Job removed")


def test_a_private_repository_needs_a_token_that_can_read_it(stack: ModelStack) -> None:
    stack.controller()
    stack.secret("hf-good", USER_NAMESPACE, {"token": "hf_good"})
    stack.secret("hf-bad", USER_NAMESPACE, {"HF_TOKEN": "hf_bad"})
    stack.grant_secret_read("hf-good", USER_NAMESPACE)
    stack.grant_secret_read("hf-bad", USER_NAMESPACE)
    url = "https://huggingface.co/acme/private-llama"
    stack.create_model("anonymous", {"url": url})
    stack.create_model("wrong-token", {"url": url, "authSecretRef": {"name": "hf-bad"}})
    stack.create_model("right-token", {"url": url, "authSecretRef": {"name": "hf-good"}})

    assert stack.wait_phase("right-token", "Ready")["source"]["resolvedType"] == "HuggingFace"
    stack.wait_phase("anonymous", "Failed")
    stack.wait_phase("wrong-token", "Failed")
    assert stack.condition("anonymous", "ArtifactResolved")["reason"] == "SourceNotFound"
    assert "authSecretRef" in stack.condition("anonymous", "ArtifactResolved")["message"]
    assert stack.condition("wrong-token", "ArtifactResolved")["reason"] == "PublicationFailed"
    assert stack.keys("artifacts/namespaced/team-a/anonymous/") == {}


def test_a_missing_repository_is_source_not_found_and_a_foreign_secret_namespace_is_refused(
    stack: ModelStack,
) -> None:
    stack.controller()
    stack.create_model("missing", {"url": "https://huggingface.co/acme/does-not-exist"})
    stack.create_model(
        "foreign",
        {
            "url": "https://huggingface.co/acme/private-llama",
            "authSecretRef": {"name": "x", "namespace": "kube-system"},
        },
    )
    stack.wait_phase("missing", "Failed")
    stack.wait_phase("foreign", "Failed")
    assert stack.condition("missing", "ArtifactResolved")["reason"] == "SourceNotFound"
    foreign = stack.condition("foreign", "ArtifactResolved")
    assert foreign["reason"] == "UnsupportedSource"
    assert "kube-system" in foreign["message"]
    assert stack.condition("missing", "Ready")["reason"] == "Failed"
    assert stack.events("PublicationFailed", name="missing")

    # Retried every AI_MODELS_PUBLICATION_RETRY_SECONDS (2 s here), with one Event for the failure.
    def asked() -> int:
        return sum(1 for request in stack.hub.requests("api") if "does-not-exist" in request.path)

    # Two more retries must come, and no sooner than the retry period apart (a hot loop would ask
    # again at once); a slow machine only makes them later, so no upper bound is asserted.
    before = asked()
    seen: dict[int, float] = {}

    def retried_twice() -> bool:
        seen.setdefault(asked() - before, time.monotonic())
        return max(seen) >= 2

    stack.eventually(retried_twice, what="two more attempts at the missing repository")
    first = min(at for count, at in seen.items() if count >= 1)
    second = min(at for count, at in seen.items() if count >= 2)
    assert second - first >= 1.0
    assert len(stack.events("PublicationFailed", name="missing")) == 1


def test_an_upload_is_waited_for_received_and_published(stack: ModelStack) -> None:
    stack.api()
    stack.controller()
    stack.create_model("uploaded", {"upload": {}})

    status = stack.wait_phase("uploaded", "WaitForUpload")
    assert conditions(status)["ArtifactResolved"] == ("False", "WaitingForUserUpload")
    assert set(status["upload"]) >= {"expiresAt", "inCluster"}
    assert stack.events("UploadWaiting", name="uploaded")

    assert stack.upload("uploaded", GGUF, filename="tiny-q4.gguf") == 201
    status = stack.wait_phase("uploaded", "Ready")

    assert status["source"] == {"resolvedType": "Upload"}
    assert "upload" not in status
    assert status["resolved"]["format"] == "GGUF"
    digest = status["artifact"]["digest"].removeprefix("sha256:")
    assert f"artifacts/namespaced/team-a/uploaded/{digest}/files/tiny-q4.gguf" in stack.keys("artifacts/")
    stack.eventually(lambda: stack.keys("uploads/") == {}, what="the staged upload removed after publication")


def test_a_cluster_model_is_published_in_the_cluster_scope(stack: ModelStack) -> None:
    stack.controller()
    stack.create_cluster_model("shared-tiny", {"url": "https://hf.co/acme/tiny-llama"})
    status = stack.wait_phase("shared-tiny", "Ready", namespace=None)
    digest = status["artifact"]["digest"].removeprefix("sha256:")
    assert f"artifacts/cluster/_cluster/shared-tiny/{digest}/manifest.json" in stack.keys("artifacts/")
    ledger = stack.ledger()
    assert ledger is not None
    assert [entry["scope"] for entry in ledger["entries"]] == ["Cluster"]


def test_deleting_a_model_removes_its_artifact_and_accounting_only(stack: ModelStack) -> None:
    stack.controller()
    for name in ("keep", "drop"):
        stack.create_model(name, {"url": "https://huggingface.co/acme/tiny-llama"})
    stack.wait_phase("keep", "Ready")
    stack.wait_phase("drop", "Ready")
    kept = stack.keys("artifacts/namespaced/team-a/keep/")

    stack.objects.delete_namespaced_custom_object(
        "ai.deckhouse.io", "v1alpha1", USER_NAMESPACE, "models", "drop"
    )
    stack.eventually(lambda: stack.model("drop") is None, what="the finalizer to finish")

    assert stack.keys("artifacts/namespaced/team-a/drop/") == {}
    assert stack.keys("artifacts/namespaced/team-a/keep/") == kept
    ledger = stack.ledger()
    assert ledger is not None
    assert [entry["owner"]["name"] for entry in ledger["entries"]] == ["keep"]


def test_a_model_from_a_catalog_entry_is_published_from_the_sources_provider(stack: ModelStack) -> None:
    stack.controller()
    stack.objects.create_cluster_custom_object(
        "ai.deckhouse.io",
        "v1alpha1",
        "modelcatalogsources",
        {
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "kind": "ModelCatalogSource",
            "metadata": {"name": "hub", "annotations": {"ai.deckhouse.io/catalog-sync": "Enabled"}},
            "spec": {"provider": "HuggingFace", "huggingFace": {"endpoint": stack.hub.url}},
        },
    )
    stack.create_model("from-catalog", {"catalog": {"sourceName": "hub", "name": "acme/tiny-llama"}})
    stack.create_model("not-in-catalog", {"catalog": {"sourceName": "hub", "name": "acme/unknown"}})
    stack.create_model("no-such-source", {"catalog": {"sourceName": "nowhere", "name": "acme/tiny-llama"}})

    status = stack.wait_phase("from-catalog", "Ready", timeout=90)
    assert status["source"] == {"resolvedType": "Catalog", "resolvedRevision": TINY.sha}
    for name in ("not-in-catalog", "no-such-source"):
        stack.wait_phase(name, "Failed")
        assert stack.condition(name, "ArtifactResolved")["reason"] == "CatalogEntryNotFound"
    assert "acme/unknown" in stack.condition("not-in-catalog", "ArtifactResolved")["message"]


def test_a_model_whose_facts_cannot_all_be_derived_is_ready_with_partial_metadata(stack: ModelStack) -> None:
    stack.controller()
    stack.create_model("bare", {"url": "https://huggingface.co/acme/bare-weights"})
    status = stack.wait_phase("bare", "Ready")
    assert conditions(status)["MetadataResolved"] == ("True", "ModelMetadataPartial")
    assert "contextWindowTokens" not in status["resolved"]
    assert status["resolved"]["parameterCount"] == 2 * 256 * 64
    # The partial profile names what it lacks; one file is "1 file".
    assert "do not tell contextWindowTokens" in stack.condition("bare", "MetadataResolved")["message"]
    assert ": 1 file, " in stack.condition("bare", "ArtifactResolved")["message"]


def test_an_upload_that_cannot_be_published_is_dropped_and_a_new_upload_is_asked_for(
    stack: ModelStack,
) -> None:
    stack.api()
    stack.controller()
    stack.create_model("retry-upload", {"upload": {}})
    first_url = stack.wait_phase("retry-upload", "WaitForUpload")["upload"]["inCluster"]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo("notes/README.md")
        member.size = 5
        tar.addfile(member, io.BytesIO(b"hello"))
    assert stack.upload("retry-upload", archive.getvalue()) == 201

    stack.eventually(
        lambda: (
            stack.status("retry-upload").get("phase") == "WaitForUpload"
            and stack.status("retry-upload").get("upload", {}).get("inCluster") not in (None, first_url)
        ),
        what="a new upload URL after the rejected archive",
    )
    waiting = stack.condition("retry-upload", "ArtifactResolved")
    assert waiting["reason"] == "WaitingForUserUpload"
    # One level of cause, no parenthesis inside a parenthesis, the weights refusal said once.
    assert waiting["message"].startswith(
        "the uploaded file could not be published (UnsupportedSource): the tar archive holds no "
        "safetensors or GGUF weights; expected a GGUF or safetensors file"
    ), waiting["message"]
    assert waiting["message"].count("safetensors or GGUF weights") == 1
    assert stack.events("PublicationFailed", name="retry-upload")
    assert stack.keys("uploads/") == {}

    assert stack.upload("retry-upload", GGUF) == 201
    stack.wait_phase("retry-upload", "Ready")
