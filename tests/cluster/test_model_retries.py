"""When a failed Model is tried again: its attempt count survives a restart of the controller, and
a fix the user makes (a retry request, the missing Secret, the missing ModelCatalogSource) is acted
on at once instead of after the retry timer (600 s here, so only the fix can explain a retry)."""

from __future__ import annotations

import datetime
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ai_models.domain.secret_reads import read_refused
from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

CONFIG = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 2048}'
WEIGHTS = safetensors_bytes({"w": ("F32", (16, 16))})
SMALL = repository("acme/small", {"config.json": CONFIG, "model.safetensors": WEIGHTS})
PRIVATE = repository(
    "acme/private", {"config.json": CONFIG, "model.safetensors": WEIGHTS}, private_token="hf_good"
)
# Longer than any test waits: a retry seen here comes from the fix, not from the timer.
NO_TIMER = {"AI_MODELS_PUBLICATION_RETRY_SECONDS": "600"}
RETRY_ANNOTATION = "ai.deckhouse.io/retry-requested-at"
# A command a condition message gives, `d8 k <arguments>`: here its arguments, for kubectl.
COMMAND = re.compile(r"`d8 k ([^`]+)`")


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [SMALL, PRIVATE]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def event_count(stack: ModelStack, reason: str, name: str, *, containing: str = "") -> int:
    """Occurrences (an Event repeated with the same message counts up instead of repeating)."""
    return sum(
        event.count or 1 for event in stack.events(reason, name=name) if containing in (event.message or "")
    )


def annotate(stack: ModelStack, name: str, value: str) -> None:
    stack.objects.patch_namespaced_custom_object(
        "ai.deckhouse.io",
        "v1alpha1",
        USER_NAMESPACE,
        "models",
        name,
        {"metadata": {"annotations": {RETRY_ANNOTATION: value}}},
    )


def test_a_restarted_controller_continues_the_attempt_count_and_a_retry_request_retries_at_once(
    stack: ModelStack,
) -> None:
    # Every file download fails for now: each publication Job ends with a temporary failure.
    stack.hub.error_next(10**6, status=503, bucket="resolve")
    first = stack.controller(**NO_TIMER)
    stack.create_model("flaky", {"url": "https://huggingface.co/acme/small"})
    stack.eventually(
        lambda: stack.status("flaky").get("failedAttempts") == 1, timeout=90, what="the first attempt counted"
    )
    assert stack.status("flaky").get("lastFailureTime")

    first.kill()  # the next leader knows only what the status says
    stack.controller("controller-1", **NO_TIMER)
    status = stack.wait_phase("flaky", "Failed", timeout=120)

    assert status["failedAttempts"] == 3
    assert stack.condition("flaky", "ArtifactResolved")["reason"] == "PublicationFailed"
    # Not 1 + 3 after the restart. A leader killed between creating a Job and recording its Event
    # leaves that one Event unwritten (the next leader follows the running Job), hence 2 or 3.
    assert event_count(stack, "PublicationStarted", "flaky") in (2, 3)
    for attempt in (1, 2):
        assert (
            event_count(stack, "PublicationFailed", "flaky", containing=f"attempt {attempt} of 3 failed") == 1
        )

    # A request that is not a timestamp is reported, on the object and in an Event.
    annotate(stack, "flaky", "now please")
    stack.eventually(
        lambda: RETRY_ANNOTATION in stack.condition("flaky", "Ready").get("message", ""),
        what="the malformed retry request reported in the Ready message",
    )
    message = stack.condition("flaky", "Ready")["message"]
    assert "'now please' is not an RFC 3339 timestamp" in message
    assert stack.events("InvalidRetryRequest", name="flaky")
    assert stack.status("flaky")["phase"] == "Failed"

    # The cause is gone; a request newer than the last failure retries at once.
    stack.hub.clear_faults()
    failed_at = datetime.datetime.fromisoformat(stack.status("flaky")["lastFailureTime"])
    annotate(stack, "flaky", (failed_at + datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    status = stack.wait_phase("flaky", "Ready", timeout=60)
    assert "failedAttempts" not in status
    assert "lastFailureTime" not in status


def test_a_model_fixed_by_creating_its_missing_secret_is_ready_within_seconds(stack: ModelStack) -> None:
    stack.controller(**NO_TIMER)
    stack.grant_secret_read("hf", USER_NAMESPACE)
    stack.create_model(
        "private", {"url": "https://huggingface.co/acme/private", "authSecretRef": {"name": "hf"}}
    )
    stack.wait_phase("private", "Failed")
    failure = stack.condition("private", "ArtifactResolved")
    assert failure["reason"] == "PublicationFailed"
    assert "does not exist" in failure["message"]
    assert stack.status("private")["lastFailureDependency"] == {
        "kind": "Secret",
        "name": "hf",
        "resourceVersion": "",
    }
    # While the Secret is missing the Hub is never asked: the Secret is read, nothing more.
    assert [request for request in stack.hub.requests() if "acme/private" in request.path] == []

    stack.secret("hf", USER_NAMESPACE, {"token": "hf_good"})

    # Well under the 600 s timer (and the default 300 s): the Secret is read every 5 s.
    stack.wait_phase("private", "Ready", timeout=30)
    assert stack.status("private")["source"]["resolvedType"] == "HuggingFace"


def test_a_model_whose_secret_the_controller_may_not_read_is_ready_once_the_grant_it_names_is_made(
    stack: ModelStack,
) -> None:
    """The chart's RBAC gives the controller no read of a user's Secret (D160): the Model says which
    grant to make, and the commands it gives, run as they are, let the publication go on."""
    stack.controller(**NO_TIMER)
    stack.secret("hf", USER_NAMESPACE, {"token": "hf_good"})
    stack.create_model(
        "private", {"url": "https://huggingface.co/acme/private", "authSecretRef": {"name": "hf"}}
    )
    stack.wait_phase("private", "Failed")
    failure = stack.condition("private", "ArtifactResolved")
    assert failure["reason"] == "PublicationFailed"
    assert failure["message"] == read_refused(USER_NAMESPACE, "hf", field="spec.source.authSecretRef")
    assert [request for request in stack.hub.requests() if "acme/private" in request.path] == []

    commands = COMMAND.findall(failure["message"])
    assert len(commands) == 2
    for command in commands:
        stack.emulator.kubectl(*shlex.split(command))

    # The Secret's version is read every 5 s while the Model is Failed; well under the 600 s timer.
    stack.wait_phase("private", "Ready", timeout=30)


def test_a_model_whose_catalog_source_is_created_later_is_ready_once_the_source_served(
    stack: ModelStack,
) -> None:
    stack.controller(**NO_TIMER)
    stack.create_model("from-catalog", {"catalog": {"sourceName": "hub", "name": "acme/small"}})
    stack.wait_phase("from-catalog", "Failed")
    assert stack.condition("from-catalog", "ArtifactResolved")["reason"] == "CatalogEntryNotFound"

    body: dict[str, Any] = {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "ModelCatalogSource",
        "metadata": {"name": "hub", "annotations": {"ai.deckhouse.io/catalog-sync": "Enabled"}},
        "spec": {"provider": "HuggingFace", "huggingFace": {"endpoint": stack.hub.url}},
    }
    stack.objects.create_cluster_custom_object("ai.deckhouse.io", "v1alpha1", "modelcatalogsources", body)

    # The source's changes (created, indexing, served) each retry the Models that name it.
    status = stack.wait_phase("from-catalog", "Ready", timeout=90)
    assert status["source"] == {"resolvedType": "Catalog", "resolvedRevision": SMALL.sha}
