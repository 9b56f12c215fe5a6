"""SharedPVC delivery end to end: the controller (webhook and reconciler) and the api as real
processes, the emulator calling the webhook over HTTPS, the test bed's cluster controllers and
provisioner, and materialize Jobs run as real `ai-models materialize` processes into the claim's
directory. Workloads are created over the API, as `kubectl apply` would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_models import names
from cluster.delivery_stack import TINY, TINY_FILES, DeliveryStack, delivery_stack, deployment, digests
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [TINY]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[DeliveryStack]:
    yield from delivery_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def test_a_deployment_created_for_a_ready_model_gets_its_files_with_one_replica_set(
    stack: DeliveryStack,
) -> None:
    stack.api()
    stack.controller()
    status = stack.ready_model("tiny", "acme/tiny-llama")

    stack.apply_workload(deployment("web", models="tiny"))

    message = stack.wait_reason("Deployment", "web", "Delivered", timeout=60)
    assert "tiny" in message
    stack.models.eventually(
        lambda: any(not (pod["spec"].get("schedulingGates")) for pod in stack.pods(selector="app=web")),
        timeout=60,
        what=lambda: f"the pod ungated: {[pod['spec'].get('schedulingGates') for pod in stack.pods()]}",
    )
    [pod] = stack.pods(selector="app=web")
    delivered = stack.delivered_files(pod, "tiny")
    for path, digest in digests(TINY_FILES).items():
        assert delivered.get(path) == digest, (path, sorted(delivered))
    container = pod["spec"]["containers"][0]
    env = {item["name"]: item.get("value") for item in container.get("env") or []}
    assert env[names.MODELS_DIR_VARIABLE] == names.MODELS_DIR
    assert json.loads(env["AI_MODELS_MODELS"]) == [
        {"name": "tiny", "path": f"{names.MODELS_DIR}/tiny", "digest": status["artifact"]["digest"]}
    ]
    owned = [rs for rs in stack.replica_sets() if rs["metadata"]["name"].startswith("web-")]
    assert len(owned) == 1, [rs["metadata"]["name"] for rs in owned]
    # The claim records the copy; the Job, its token and its image pull copy are removed.
    [claim] = stack.claims()
    assert (
        status["artifact"]["digest"]
        in claim["metadata"]["annotations"][names.MATERIALIZED_DIGESTS_ANNOTATION]
    )
    stack.models.eventually(
        lambda: not stack.jobs() and not stack.materialization_secrets(),
        timeout=30,
        what=lambda: f"the finished Job and its Secrets removed: {stack.describe()}",
    )
