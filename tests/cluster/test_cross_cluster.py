"""Another ai-models cluster as a catalog source, end to end: two module stacks (two emulators, two
stores, each with its controller and api). ClusterModels published in the serving cluster are
published again in the consuming cluster from an AIModels ModelCatalogSource, streamed from the
serving cluster's serving API, each file verified, with the same digest; a refused token, an
unreachable endpoint and a ClusterModel deleted there end with their reasons."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.cross_cluster_stack import CrossClusterStack, cross_cluster_stack
from cluster.model_stack import USER_NAMESPACE, ModelStack
from fakes.hub_corpus import repository
from fakes.model_files import safetensors_bytes

CONFIG = (
    b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
    b'"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, '
    b'"vocab_size": 256, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}'
)
WEIGHTS = safetensors_bytes(
    {"model.embed_tokens.weight": ("BF16", (256, 64)), "lm_head.weight": ("BF16", (256, 64))}
)
SHARED = repository(
    "acme/shared-llama",
    {"config.json": CONFIG, "model.safetensors": WEIGHTS, "tokenizer.json": b'{"version": "1.0"}'},
)
DOOMED = repository("acme/doomed-llama", {"config.json": CONFIG, "model.safetensors": WEIGHTS})
SOURCE = "serving-cluster"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrossClusterStack]:
    with cross_cluster_stack(tmp_path_factory.mktemp("cross-cluster"), [SHARED, DOOMED]) as stack:
        stack.ai_models_source(SOURCE)
        yield stack


@pytest.fixture(scope="module")
def shared(clusters: CrossClusterStack) -> dict[str, Any]:
    """The serving cluster's Ready ClusterModel `shared-llama`: its status."""
    return clusters.publish_cluster_model("shared-llama", SHARED.id)


def artifact_dir(name: str, status: dict[str, Any], *, namespace: str | None = USER_NAMESPACE) -> str:
    """The artifact's directory in a store (domain.artifacts.layout), from the object's status."""
    digest = status["artifact"]["digest"].removeprefix("sha256:")
    where = f"namespaced/{namespace}" if namespace else "cluster/_cluster"
    return f"artifacts/{where}/{name}/{digest}/"


def stored_files(stack: ModelStack, directory: str) -> dict[str, str]:
    """path -> sha256 of the bytes in the stack's bucket under the artifact directory."""
    prefix = directory + "files/"
    found = {}
    for key in stack.keys(prefix):
        body = stack.s3().get_object(Bucket=stack.bucket.name, Key=key)["Body"].read()
        found[key.removeprefix(prefix)] = hashlib.sha256(body).hexdigest()
    return found


def manifest(stack: ModelStack, directory: str) -> dict[str, Any]:
    key = directory + "manifest.json"
    document: dict[str, Any] = json.loads(
        stack.s3().get_object(Bucket=stack.bucket.name, Key=key)["Body"].read()
    )
    return document


def test_a_model_from_the_other_clusters_entry_is_ready_with_its_digest_and_verified_bytes(
    clusters: CrossClusterStack, shared: dict[str, Any]
) -> None:
    consuming = clusters.consuming
    clusters.model_from("llama-copy", SOURCE, "shared-llama")

    status = consuming.wait_phase("llama-copy", "Ready", timeout=120)

    assert status["artifact"]["digest"] == shared["artifact"]["digest"]
    assert status["artifact"]["sizeBytes"] == shared["artifact"]["sizeBytes"]
    assert status["source"]["resolvedType"] == "Catalog"
    assert status["resolved"] == shared["resolved"]
    there_dir = artifact_dir("shared-llama", shared, namespace=None)
    here_dir = artifact_dir("llama-copy", status)
    there, here = manifest(clusters.serving, there_dir), manifest(consuming, here_dir)
    assert {item["path"]: item["sha256"] for item in here["files"]} == {
        item["path"]: item["sha256"] for item in there["files"]
    }
    # The bytes in this cluster's store are the ones that cluster's manifest lists.
    assert stored_files(consuming, here_dir) == {item["path"]: item["sha256"] for item in there["files"]}
    assert here["source"] == {
        "type": "AIModels",
        "repository": "shared-llama",
        "endpoint": clusters.serving_endpoint,
        "revision": SHARED.sha,
    }
    # It reserved what the entry's verdict requires: the artifact's size there.
    (started,) = consuming.events("PublicationStarted", name="llama-copy")
    assert f"publishing {shared['artifact']['sizeBytes']} bytes " in started.message
    # Accounted as any publication: the ledger holds the artifact (its files and its manifest).
    ledger = consuming.ledger() or {}
    (entry,) = [item for item in ledger.get("entries", []) if item["owner"]["name"] == "llama-copy"]
    assert entry["state"] == "Published"
    assert entry["sizeBytes"] >= shared["artifact"]["sizeBytes"]


def test_the_serving_clusters_cluster_models_are_entries_of_the_source(
    clusters: CrossClusterStack, shared: dict[str, Any]
) -> None:
    clusters.request_sync(SOURCE)

    clusters.consuming.eventually(
        lambda: clusters.entry(SOURCE, "shared-llama") is not None,
        timeout=60,
        what=lambda: f"entry shared-llama of {SOURCE} (source status {clusters.source_status(SOURCE)})",
    )

    entry = clusters.entry(SOURCE, "shared-llama") or {}
    assert entry["provider"] == "AIModels"
    assert entry["metadata"]["sha"] == shared["artifact"]["digest"]
    # What the entry says a copy needs is what a Model from it reserves: the artifact's size there.
    assert entry["resources"]["weightsBytes"] == shared["artifact"]["sizeBytes"]
    assert entry["downloadVerdict"]["requiredBytes"] == shared["artifact"]["sizeBytes"]
    assert entry["resources"]["format"] == shared["resolved"]["format"]


def test_a_cluster_model_from_the_other_cluster_gets_the_same_digest(
    clusters: CrossClusterStack, shared: dict[str, Any]
) -> None:
    consuming = clusters.consuming
    consuming.create_cluster_model(
        "llama-mirror", {"catalog": {"sourceName": SOURCE, "name": "shared-llama"}}
    )

    status = consuming.wait_phase("llama-mirror", "Ready", namespace=None, timeout=120)

    assert status["artifact"]["digest"] == shared["artifact"]["digest"]
    assert stored_files(consuming, artifact_dir("llama-mirror", status, namespace=None)) == stored_files(
        clusters.serving, artifact_dir("shared-llama", shared, namespace=None)
    )


def test_a_token_the_other_cluster_refuses_ends_with_publication_failed(clusters: CrossClusterStack) -> None:
    clusters.token_secret("refused-token", "not-a-token-of-that-cluster")
    clusters.ai_models_source("refused-token", token_secret="refused-token")
    clusters.model_from("refused", "refused-token", "shared-llama")

    condition = clusters.wait_reason("refused", "PublicationFailed")

    assert "did not accept the token" in condition["message"]
    assert "not-a-token-of-that-cluster" not in condition["message"]
    assert clusters.consuming.status("refused")["phase"] == "Failed"


def test_an_unreachable_endpoint_ends_with_publication_failed(clusters: CrossClusterStack) -> None:
    clusters.ai_models_source("unreachable", endpoint=f"http://127.0.0.1:{clusters.closed_port}")
    clusters.model_from("unreachable", "unreachable", "shared-llama")

    condition = clusters.wait_reason("unreachable", "PublicationFailed")

    assert "unreachable" in condition["message"]
    assert f"127.0.0.1:{clusters.closed_port}" in condition["message"]


def test_a_cluster_model_deleted_in_the_other_cluster_ends_with_source_not_found(
    clusters: CrossClusterStack,
) -> None:
    serving = clusters.serving
    clusters.publish_cluster_model("doomed-llama", DOOMED.id)
    serving.objects.delete_cluster_custom_object(
        "ai.deckhouse.io", "v1alpha1", "clustermodels", "doomed-llama"
    )
    serving.eventually(
        lambda: serving.model("doomed-llama", namespace=None) is None,
        what="ClusterModel doomed-llama deleted",
    )
    clusters.model_from("doomed", SOURCE, "doomed-llama")

    condition = clusters.wait_reason("doomed", "SourceNotFound")

    assert "ClusterModel doomed-llama of the cluster at" in condition["message"]
    assert "is gone" in condition["message"]


def test_a_source_without_the_opt_in_never_calls_the_other_cluster(clusters: CrossClusterStack) -> None:
    clusters.ai_models_source("not-opted-in", opted_in=False)
    clusters.model_from("not-opted-in", "not-opted-in", "shared-llama")

    condition = clusters.wait_reason("not-opted-in", "CatalogEntryNotFound")

    assert "ai.deckhouse.io/catalog-sync=Enabled" in condition["message"]

    # Written, but not as the opt-in: the message says what it must be, not to add it.
    clusters.ai_models_source("wrong-case", opt_in_value="enabled")
    clusters.model_from("wrong-case", "wrong-case", "shared-llama")
    condition = clusters.wait_reason("wrong-case", "CatalogEntryNotFound")
    assert "is 'enabled'; the value must be exactly Enabled (case-sensitive)" in condition["message"]


def test_a_model_waits_while_the_cluster_model_there_is_not_ready(clusters: CrossClusterStack) -> None:
    serving = clusters.serving
    serving.create_cluster_model("awaiting-upload", {"upload": {}})
    serving.wait_phase("awaiting-upload", "WaitForUpload", namespace=None)
    clusters.model_from("waiting", SOURCE, "awaiting-upload")

    clusters.consuming.eventually(
        lambda: (
            "is not Ready in that cluster"
            in clusters.consuming.condition("waiting", "Ready").get("message", "")
        ),
        what=lambda: (
            f"Model waiting pending on the ClusterModel there (now {clusters.consuming.status('waiting')})"
        ),
    )

    assert clusters.consuming.status("waiting")["phase"] == "Pending"
