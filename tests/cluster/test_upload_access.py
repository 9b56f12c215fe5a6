"""Who may upload, against the real controller and api processes: the URL in status.upload is read
by every User, so the api also asks Kubernetes whether the caller may update the object, and takes
only the URL the status holds now (D40)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

# Real weights: the publisher refuses a file that is not a model.
WEIGHTS = safetensors_bytes({"model.embed_tokens.weight": ("BF16", (256, 64))})


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="1Gi")
    # A budget, so every refused upload would show up as a reservation if one were taken.


def reserved(stack: ModelStack) -> list[dict[str, Any]]:
    ledger = stack.ledger() or {"entries": []}
    return [entry for entry in ledger["entries"] if entry["state"] == "Reserved"]


def nothing_taken(stack: ModelStack) -> bool:
    return stack.keys("uploads/") == {} and reserved(stack) == []


def started(stack: ModelStack) -> None:
    stack.api()
    stack.controller()
    stack.eventually(lambda: (stack.ledger() or {}).get("confirmed") is True, what="the inventory pass")


def test_only_a_writer_of_the_model_can_upload_to_it(stack: ModelStack) -> None:
    started(stack)
    stack.create_model("guarded", {"upload": {}})
    stack.wait_phase("guarded", "WaitForUpload")
    cluster_reader = stack.uploader("User")
    namespace_reader = stack.uploader("User", namespace=USER_NAMESPACE)
    stack.core.create_namespace({"metadata": {"name": "other-team"}})
    elsewhere = stack.uploader("Editor", namespace="other-team")

    assert stack.upload("guarded", WEIGHTS, token="") == 401  # no token of the caller's own
    assert stack.upload("guarded", WEIGHTS, token="not-a-kubernetes-token") == 401
    for subject in (cluster_reader, namespace_reader, elsewhere):
        assert stack.upload("guarded", WEIGHTS, token=subject.token) == 403, subject.name
    assert nothing_taken(stack)
    assert stack.status("guarded")["phase"] == "WaitForUpload"

    editor = stack.uploader("Editor", namespace=USER_NAMESPACE)
    assert stack.upload("guarded", WEIGHTS, token=editor.token) == 201
    stack.wait_phase("guarded", "Ready")


def test_a_cluster_model_needs_the_cluster_editor_level(stack: ModelStack) -> None:
    started(stack)
    stack.create_cluster_model("shared", {"upload": {}})
    stack.wait_phase("shared", "WaitForUpload", namespace=None)
    for level in ("User", "Editor", "Admin"):
        subject = stack.uploader(level)
        assert stack.upload("shared", WEIGHTS, namespace=None, token=subject.token) == 403, level
    assert nothing_taken(stack)

    assert stack.upload("shared", WEIGHTS, namespace=None, token=stack.uploader("ClusterEditor").token) == 201
    stack.wait_phase("shared", "Ready", namespace=None)


def test_an_old_upload_url_is_refused_once_a_new_one_was_issued(stack: ModelStack) -> None:
    started(stack)
    stack.create_model("reissued", {"upload": {}})
    old = stack.wait_phase("reissued", "WaitForUpload")["upload"]["inCluster"]
    # Drop the URL: the controller issues a new one, as it does before the old one expires.
    stack.objects.patch_namespaced_custom_object_status(
        "ai.deckhouse.io", "v1alpha1", USER_NAMESPACE, "models", "reissued", {"status": {"upload": None}}
    )
    stack.eventually(
        lambda: (stack.status("reissued").get("upload") or {}).get("inCluster") not in (None, old),
        what="a new upload URL",
    )
    assert stack.upload("reissued", WEIGHTS, url=old) == 403
    assert nothing_taken(stack)
    assert stack.upload("reissued", WEIGHTS) == 201
    stack.wait_phase("reissued", "Ready")
