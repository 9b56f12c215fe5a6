"""Storage accounting in a running module: budget, unknown usage, the inventory pass restoring the
ledger, interrupted and damaged publications, and cleanup while the object store is away."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import GGML_F32, MIB, gguf_bytes, safetensors_bytes, synthetic_safetensors
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

CONFIG = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 2048}'
SMALL = repository(
    "acme/small", {"config.json": CONFIG, "model.safetensors": safetensors_bytes({"w": ("F32", (64, 64))})}
)
LARGE_WEIGHTS = synthetic_safetensors(256 * MIB, seed=7)
LARGE = repository("acme/large", {"config.json": CONFIG, "model.safetensors": LARGE_WEIGHTS})
GGUF = gguf_bytes(
    metadata={"general.architecture": "llama", "llama.context_length": 2048},
    tensors={"w": (GGML_F32, (8, 8))},
)


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [SMALL, LARGE]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="1Mi")


@pytest.fixture
def roomy(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="10Gi")


def reason(stack: ModelStack, name: str) -> str:
    return str(stack.condition(name, "ArtifactResolved").get("reason"))


def reserved(stack: ModelStack) -> list[dict[str, Any]]:
    ledger = stack.ledger() or {"entries": []}
    return [entry for entry in ledger["entries"] if entry["state"] == "Reserved"]


def published_bytes(stack: ModelStack) -> int:
    ledger = stack.ledger() or {"entries": []}
    return sum(entry["sizeBytes"] for entry in ledger["entries"] if entry["state"] == "Published")


def test_over_budget_fails_with_insufficient_storage_and_writes_nothing(stack: ModelStack) -> None:
    stack.controller()
    stack.eventually(
        lambda: (stack.ledger() or {}).get("confirmed") is True, what="the start-up inventory pass"
    )
    stack.create_model("large", {"url": "https://huggingface.co/acme/large"})
    stack.wait_phase("large", "Failed")
    assert reason(stack, "large") == "InsufficientStorage"
    assert "capacityLimit" in stack.condition("large", "ArtifactResolved")["message"]
    assert stack.keys("artifacts/") == {}
    assert stack.jobs() == []
    assert reserved(stack) == []


def test_unknown_usage_refuses_until_an_inventory_pass_confirms_the_ledger(stack: ModelStack) -> None:
    # An object the layout does not know makes every inventory pass report an error.
    stack.s3().put_object(Bucket=stack.bucket.name, Key="artifacts/stray-object", Body=b"?")
    stack.controller()
    stack.create_model("small", {"url": "https://huggingface.co/acme/small"})
    stack.wait_phase("small", "Failed")
    assert reason(stack, "small") == "StorageUsageUnknown"
    # The Model may be refused before the first pass has written its unconfirmed ledger (no ledger
    # is unknown usage too); the pass then writes one, unconfirmed.
    stack.eventually(
        lambda: (stack.ledger() or {}).get("confirmed") is False,
        what="the unconfirmed ledger of the first pass",
    )

    stack.s3().delete_object(Bucket=stack.bucket.name, Key="artifacts/stray-object")
    # Deleting the ledger Secret runs a pass at once; it is clean now and confirms the ledger.
    stack.core.delete_namespaced_secret("ai-models-storage-accounting", "d8-ai-models")
    stack.wait_phase("small", "Ready", timeout=60)
    assert (stack.ledger() or {}).get("confirmed") is True


def test_a_deleted_ledger_means_unknown_usage_until_the_inventory_pass_restores_it_exactly(
    roomy: ModelStack,
) -> None:
    stack = roomy
    stack.api()
    controller = stack.controller()
    stack.create_model("small", {"url": "https://huggingface.co/acme/small"})
    stack.create_cluster_model("shared", {"url": "https://huggingface.co/acme/small"})
    stack.create_model("uploaded", {"upload": {}})
    stack.wait_phase("small", "Ready")
    stack.wait_phase("shared", "Ready", namespace=None)
    stack.wait_phase("uploaded", "WaitForUpload")
    before = stack.ledger()
    assert before is not None

    controller.kill()  # no leader: nothing restores the ledger for now
    stack.core.delete_namespaced_secret("ai-models-storage-accounting", "d8-ai-models")
    assert stack.upload("uploaded", GGUF) == 507  # usage unknown with a budget: nothing is reserved
    assert stack.keys("uploads/") == {}

    stack.controller("controller-1")
    stack.eventually(lambda: (stack.ledger() or {}).get("confirmed") is True, what="the inventory pass")
    restored = stack.ledger()
    assert restored is not None
    assert published_bytes(stack) == stack.stored_artifact_bytes()
    assert sorted(e["owner"]["name"] for e in restored["entries"]) == ["shared", "small"]
    assert sorted(map(str, restored["entries"])) == sorted(map(str, before["entries"]))
    assert stack.upload("uploaded", GGUF) == 201
    stack.wait_phase("uploaded", "Ready")


def test_a_publish_pod_killed_mid_stream_leaks_no_reservation_and_the_model_still_becomes_ready(
    roomy: ModelStack,
) -> None:
    stack = roomy
    stack.controller(AI_MODELS_INVENTORY_INTERVAL_SECONDS="2")
    stack.create_model("large", {"url": "https://huggingface.co/acme/large"})
    stack.eventually(
        lambda: stack.status("large").get("progress", "0%") not in ("0%", ""),
        what="the publication to stream some bytes",
    )
    uid = stack.model("large")["metadata"]["uid"]  # type: ignore[index]
    killed = stack.runner.kill(f"publish-{uid}", "d8-ai-models")
    assert killed

    stack.wait_phase("large", "Ready", timeout=120)
    stack.eventually(
        lambda: reserved(stack) == [] and published_bytes(stack) == stack.stored_artifact_bytes(),
        what="the next inventory pass to leave exactly the published bytes",
    )
    body = stack.s3().get_object(
        Bucket=stack.bucket.name,
        Key=next(key for key in stack.keys("artifacts/") if key.endswith("files/model.safetensors")),
    )["Body"]
    digest = hashlib.sha256()
    for chunk in iter(lambda: body.read(8 * MIB), b""):
        digest.update(chunk)
    assert digest.hexdigest() == LARGE_WEIGHTS.sha256


def test_a_damaged_artifact_is_published_again(roomy: ModelStack) -> None:
    stack = roomy
    stack.controller(AI_MODELS_INVENTORY_INTERVAL_SECONDS="2")
    stack.create_model("small", {"url": "https://huggingface.co/acme/small"})
    stack.wait_phase("small", "Ready")
    key = next(key for key in stack.keys("artifacts/") if key.endswith("files/model.safetensors"))
    original = stack.s3().get_object(Bucket=stack.bucket.name, Key=key)["Body"].read()
    stack.s3().put_object(Bucket=stack.bucket.name, Key=key, Body=b"\0" * len(original))

    stack.eventually(lambda: bool(stack.events("ArtifactDamaged", name="small")), what="the damage noticed")
    stack.eventually(
        lambda: (
            stack.status("small").get("phase") == "Ready"
            and stack.s3().get_object(Bucket=stack.bucket.name, Key=key)["Body"].read() == original
        ),
        what="the artifact published again",
    )


def test_delete_while_the_store_is_away_finishes_once_it_is_back_and_spares_other_models(
    roomy: ModelStack,
) -> None:
    stack = roomy
    stack.controller()
    stack.create_model("keep", {"url": "https://huggingface.co/acme/small"})
    stack.create_model("keep-2", {"url": "https://huggingface.co/acme/small"})
    stack.create_model("kee", {"url": "https://huggingface.co/acme/small"})
    for name in ("keep", "keep-2", "kee"):
        stack.wait_phase(name, "Ready")
    spared = {name: stack.keys(f"artifacts/namespaced/team-a/{name}/") for name in ("keep-2", "kee")}

    stack.store_proxy.block()
    stack.objects.delete_namespaced_custom_object(
        "ai.deckhouse.io", "v1alpha1", USER_NAMESPACE, "models", "keep"
    )
    stack.eventually(
        lambda: bool(stack.events("CleanupFailed", name="keep")), what="the failed cleanup reported"
    )
    assert stack.status("keep")["phase"] == "Deleting"

    stack.store_proxy.unblock()
    stack.eventually(lambda: stack.model("keep") is None, timeout=90, what="the finalizer to finish")
    assert stack.keys("artifacts/namespaced/team-a/keep/") == {}
    for name, keys in spared.items():
        assert stack.keys(f"artifacts/namespaced/team-a/{name}/") == keys


def test_publications_wait_for_a_slot_and_the_metrics_follow_the_ledger(roomy: ModelStack) -> None:
    stack = roomy
    stack.controller(AI_MODELS_PUBLICATION_MAX_CONCURRENT="1")
    stack.create_model("large", {"url": "https://huggingface.co/acme/large"})
    stack.eventually(lambda: stack.status("large").get("phase") == "Publishing", what="the first publication")
    stack.create_model("small", {"url": "https://huggingface.co/acme/small"})

    stack.eventually(lambda: stack.status("small").get("phase") == "Pending", what="the second to wait")
    waiting = stack.condition("small", "ArtifactResolved")
    assert waiting["reason"] == "Pending"
    assert "waiting for a publication slot: 1 of 1 running" in waiting["message"]
    assert stack.condition("large", "ArtifactResolved")["reason"] == "Publishing"
    assert len(stack.jobs()) == 1

    stack.wait_phase("large", "Ready", timeout=120)
    stack.wait_phase("small", "Ready")
    stack.eventually(lambda: stack.jobs() == [], what="the Jobs removed")
    metrics = stack.metrics()
    assert metrics["d8_ai_models_storage_ledger_present"] == 1
    assert metrics["d8_ai_models_storage_capacity_bytes"] == 10 * 1024**3
    assert metrics['d8_ai_models_storage_used_bytes{scope="Namespaced"}'] == published_bytes(stack)
    assert metrics['d8_ai_models_storage_used_bytes{scope="Cluster"}'] == 0
    assert metrics['d8_ai_models_storage_artifacts{scope="Namespaced"}'] == 2
    assert metrics["d8_ai_models_storage_inventory_pass_success"] == 1
    assert metrics["d8_ai_models_storage_inventory_last_success_timestamp_seconds"] > 0
    assert metrics['d8_ai_models_publications_total{result="succeeded"}'] == 2


# ----- a restart that lost the API objects: the store is intact, its objects are not ----------

RESTART_ENV = {
    "AI_MODELS_INVENTORY_INTERVAL_SECONDS": "0.5",
    "AI_MODELS_INVENTORY_ORPHAN_GRACE_SECONDS": "3600",
}


def publish_and_lose_the_api_objects(stack: ModelStack, **env: str) -> dict[str, int]:
    """Publish two Models and a ClusterModel, then take the objects and the ledger away as a
    restarted local stack does (no finalizer runs); returns the stored keys."""
    controller = stack.controller(**RESTART_ENV, **env)
    stack.create_model("first", {"url": "https://huggingface.co/acme/small"})
    stack.create_model("second", {"url": "https://huggingface.co/acme/small"})
    stack.create_cluster_model("shared", {"url": "https://huggingface.co/acme/small"})
    for name, namespace in (("first", USER_NAMESPACE), ("second", USER_NAMESPACE), ("shared", None)):
        stack.wait_phase(name, "Ready", namespace=namespace)
    controller.kill()
    for name in ("first", "second"):
        stack.objects.patch_namespaced_custom_object(
            "ai.deckhouse.io", "v1alpha1", USER_NAMESPACE, "models", name, {"metadata": {"finalizers": []}}
        )
        stack.objects.delete_namespaced_custom_object(
            "ai.deckhouse.io", "v1alpha1", USER_NAMESPACE, "models", name
        )
    stack.objects.patch_cluster_custom_object(
        "ai.deckhouse.io", "v1alpha1", "clustermodels", "shared", {"metadata": {"finalizers": []}}
    )
    stack.objects.delete_cluster_custom_object("ai.deckhouse.io", "v1alpha1", "clustermodels", "shared")
    stack.core.delete_namespaced_secret("ai-models-storage-accounting", "d8-ai-models")
    stored = stack.keys("artifacts/")
    assert len({key.rsplit("/files/", 1)[0] for key in stored if "/files/" in key}) == 3
    return stored


def metric(stack: ModelStack, replica: str, name: str) -> float | None:
    """A sample of the replica's metrics; None while it does not serve them yet."""
    try:
        return stack.metrics(replica).get(name)
    except OSError:
        return None


def passes(stack: ModelStack, replica: str) -> float:
    return metric(stack, replica, 'd8_ai_models_storage_inventory_passes_total{result="success"}') or 0


def wait_for_passes(stack: ModelStack, replica: str, count: int) -> None:
    stack.eventually(lambda: passes(stack, replica) >= count, what=f"{count} inventory passes of {replica}")


def absences(stack: ModelStack) -> list[dict[str, str]]:
    return list((stack.ledger() or {}).get("absences") or [])


def backdate_absences(stack: ModelStack) -> None:
    """What the grace period passing looks like to the next controller: the first-seen times in the
    ledger are older than it (only while no controller runs, so no pass writes over it)."""
    secret = stack.core.read_namespaced_secret("ai-models-storage-accounting", "d8-ai-models")
    ledger = json.loads(base64.b64decode(secret.data["ledger.json"]))
    for item in ledger["absences"]:
        item["since"] = "2026-01-01T00:00:00Z"
    secret.data["ledger.json"] = base64.b64encode(json.dumps(ledger).encode()).decode()
    stack.core.replace_namespaced_secret("ai-models-storage-accounting", "d8-ai-models", secret)


def test_a_restart_that_lost_the_objects_removes_no_artifact_before_the_grace_period_across_restarts(
    roomy: ModelStack,
) -> None:
    stack = roomy
    stored = publish_and_lose_the_api_objects(stack, AI_MODELS_INVENTORY_MAX_REMOVAL_FRACTION="1")

    restarted = stack.controller("controller-1", **RESTART_ENV, AI_MODELS_INVENTORY_MAX_REMOVAL_FRACTION="1")
    wait_for_passes(stack, "controller-1", 3)
    assert stack.keys("artifacts/") == stored  # neither the first pass nor the next ones removed anything
    recorded = absences(stack)
    assert len(recorded) == 3
    assert stack.metrics("controller-1")["d8_ai_models_storage_inventory_orphaned_artifacts"] == 3
    assert published_bytes(stack) == stack.stored_artifact_bytes()  # still counted while it waits

    restarted.kill()
    again = stack.controller("controller-2", **RESTART_ENV, AI_MODELS_INVENTORY_MAX_REMOVAL_FRACTION="1")
    wait_for_passes(stack, "controller-2", 2)
    assert stack.keys("artifacts/") == stored
    assert absences(stack) == recorded  # the first-seen times survived the restart

    again.kill()
    backdate_absences(stack)
    stack.controller("controller-3", **RESTART_ENV, AI_MODELS_INVENTORY_MAX_REMOVAL_FRACTION="1")
    stack.eventually(
        lambda: stack.keys("artifacts/") == {}, what="the artifacts removed after the grace period"
    )
    metrics = stack.metrics("controller-3")
    assert metrics["d8_ai_models_storage_inventory_removed_artifacts_total"] == 3
    assert metrics["d8_ai_models_storage_inventory_removed_bytes_total"] == sum(stored.values())
    log = stack.processes[-1].log()
    assert log.count("inventory pass removed what no object owns") == 3
    stack.eventually(lambda: absences(stack) == [], what="the absences forgotten")


def test_a_restart_that_lost_the_objects_never_removes_most_of_the_store_at_once(roomy: ModelStack) -> None:
    stack = roomy
    stored = publish_and_lose_the_api_objects(stack)
    first = stack.controller("controller-1", **RESTART_ENV)
    wait_for_passes(stack, "controller-1", 2)
    first.kill()
    backdate_absences(stack)

    stack.controller("controller-2", **RESTART_ENV)

    stack.eventually(
        lambda: metric(stack, "controller-2", "d8_ai_models_storage_inventory_removal_blocked") == 1,
        what="the removal held back",
    )
    wait_for_passes(stack, "controller-2", 3)
    assert stack.keys("artifacts/") == stored
    assert stack.metrics("controller-2")["d8_ai_models_storage_inventory_removed_artifacts_total"] == 0
    assert (
        "inventory pass held back removals that would take most of the store at once"
        in stack.processes[-1].log()
    )
    assert (stack.ledger() or {}).get("confirmed") is True
