"""Catalog sizes in a running module (issue 15, D131): a source whose fake Hub lists FP8, MXFP4,
GGUF-only and encoder repositories without safetensors metadata stores a size for each, and the
api's `downloadVerdict.requiredBytes` of each entry is exactly what the controller reserves for a
Model created from that entry; a repository with nothing to publish stays without a size."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.s3 import S3Bucket
from fakes.sized_repositories import PICKLES_ONLY, SIZED, expected_bytes
from kubeemu.pytest_fixtures import RunningEmulator

SOURCE = "sized"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [*SIZED, PICKLES_ONLY]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="10Gi")


def entry(stack: ModelStack, model_id: str) -> dict[str, Any] | None:
    quoted = urllib.parse.quote(model_id, safe="/")
    url = f"http://127.0.0.1:{stack.api_port}/api/catalog-import/v1/sources/{SOURCE}/models/{quoted}"
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {stack.emulator.superuser.token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            document: dict[str, Any] = json.load(response)
            return document
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def reservations(stack: ModelStack) -> dict[str, int]:
    ledger = stack.ledger() or {"entries": []}
    return {
        entry["owner"]["name"]: entry["sizeBytes"]
        for entry in ledger["entries"]
        if entry["state"] == "Reserved"
    }


def test_every_sizable_entry_has_a_size_and_its_required_bytes_are_what_a_model_from_it_reserves(
    stack: ModelStack,
) -> None:
    stack.api()
    stack.controller()
    stack.eventually(
        lambda: (stack.ledger() or {}).get("confirmed") is True, what="the start-up inventory pass"
    )
    stack.objects.create_cluster_custom_object(
        "ai.deckhouse.io",
        "v1alpha1",
        "modelcatalogsources",
        {
            "apiVersion": "ai.deckhouse.io/v1alpha1",
            "kind": "ModelCatalogSource",
            "metadata": {"name": SOURCE, "annotations": {"ai.deckhouse.io/catalog-sync": "Enabled"}},
            "spec": {"provider": "HuggingFace", "huggingFace": {"endpoint": stack.hub.url}},
        },
    )
    stack.eventually(
        lambda: all(entry(stack, model.id) is not None for model in (*SIZED, PICKLES_ONLY)),
        timeout=90,
        what="every repository served by the api as an entry of the source",
    )

    entries = {model.id: entry(stack, model.id) or {} for model in (*SIZED, PICKLES_ONLY)}
    for model in SIZED:
        found = entries[model.id]
        assert found["resources"]["weightsBytes"] == expected_bytes(model), model.id
        assert found["downloadVerdict"]["verdict"] == "Feasible", model.id
        assert found["downloadVerdict"]["requiredBytes"] == expected_bytes(model), model.id
    assert "weightsBytes" not in entries[PICKLES_ONLY.id]["resources"]
    assert entries[PICKLES_ONLY.id]["downloadVerdict"]["verdict"] == "EstimateUnavailable"

    # Models from the entries stop at their reservation: the publish Jobs get no Pods.
    stack.runner.pause_new_pods()
    names = {model.id: f"from-{model.id.split('/', 1)[1].lower()}" for model in SIZED}
    for model in SIZED:
        stack.create_model(names[model.id], {"catalog": {"sourceName": SOURCE, "name": model.id}})
    stack.eventually(
        lambda: set(names.values()) <= set(reservations(stack)),
        timeout=60,
        what=lambda: f"a reservation for each Model (ledger: {stack.ledger()})",
    )
    reserved = reservations(stack)
    for model in SIZED:
        assert reserved[names[model.id]] == entries[model.id]["downloadVerdict"]["requiredBytes"], model.id
        assert stack.status(names[model.id], namespace=USER_NAMESPACE)["source"]["resolvedType"] == "Catalog"
