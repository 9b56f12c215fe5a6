"""What `kubectl get` shows of the module's kinds (issue 16): the columns a user watching a
publication needs by default (phase, progress, source, readable size, reason), the rest with
`-o wide`; the controller fills SOURCE from the first status (a failed Model too) and SIZE at Ready;
each kind answers to its short name."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ai_models.domain.sizes import size_text
from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

MODEL_COLUMNS = ["NAME", "PHASE", "PROGRESS", "SOURCE", "SIZE", "REASON", "AGE"]
MODEL_WIDE = [*MODEL_COLUMNS, "FORMAT", "SIZEBYTES", "MESSAGE", "ARTIFACTURI"]
SOURCE_COLUMNS = ["NAME", "PROVIDER", "READY", "INDEXING", "MODELS", "REASON", "LASTSYNC", "AGE"]

OBJECTS = """
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {name: qwen, namespace: default}
spec: {source: {url: https://huggingface.co/Qwen/Qwen3-0.6B}}
---
apiVersion: ai.deckhouse.io/v1alpha1
kind: ClusterModel
metadata: {name: bge}
spec: {source: {url: https://huggingface.co/BAAI/bge-m3}}
---
apiVersion: ai.deckhouse.io/v1alpha1
kind: ModelCatalogSource
metadata: {name: huggingface}
spec:
  provider: HuggingFace
  huggingFace: {pipelineTags: [text-generation]}
"""
PUBLISHING = {
    "phase": "Publishing",
    "progress": "42%",
    "source": {"resolvedType": "HuggingFace"},
    "artifact": {"size": "1.2 GiB", "sizeBytes": 1288490189},
    "conditions": [
        {
            "type": "ArtifactResolved",
            "status": "False",
            "reason": "Publishing",
            "message": "copying files",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
}


def _header(output: str) -> list[str]:
    return output.splitlines()[0].split()


@pytest.mark.parametrize(("resource", "namespace"), [("mdl", "default"), ("cmdl", None)])
def test_models_show_progress_source_size_and_reason_by_default(
    kubectl: Kubectl, resource: str, namespace: str | None
) -> None:
    kubectl("apply", "-f", "-", input=OBJECTS)
    name = "qwen" if namespace else "bge"
    where = ["-n", namespace] if namespace else []
    kubectl(
        "patch",
        resource,
        name,
        *where,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": PUBLISHING}),
    )

    table = kubectl("get", resource, name, *where).stdout
    assert _header(table) == MODEL_COLUMNS
    assert table.splitlines()[1].split()[:7] == [
        name,
        "Publishing",
        "42%",
        "HuggingFace",
        "1.2",
        "GiB",
        "Publishing",
    ]
    wide = kubectl("get", resource, name, *where, "-o", "wide").stdout
    assert _header(wide) == MODEL_WIDE
    assert "1288490189" in wide
    assert "copying files" in wide


def test_catalog_sources_show_the_ready_reason(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=OBJECTS)
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "WaitingForOptIn",
                "message": "add the annotation",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    kubectl(
        "patch",
        "mcs",
        "huggingface",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    table = kubectl("get", "mcs").stdout
    assert _header(table) == SOURCE_COLUMNS
    assert "WaitingForOptIn" in table.splitlines()[1].split()
    assert _header(kubectl("get", "mcs", "-o", "wide").stdout) == [*SOURCE_COLUMNS, "MESSAGE"]


# The short names (D130): discovery carries each CRD's shortNames, and kubectl resolves them.
def test_kubectl_gets_each_kind_by_its_short_name(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=OBJECTS)
    names = "jsonpath={range .items[*]}{.kind}/{.metadata.name} {end}"
    assert kubectl("get", "mdl", "-A", "-o", names).stdout.split() == ["Model/qwen"]
    assert kubectl("get", "cmdl", "-o", names).stdout.split() == ["ClusterModel/bge"]
    assert kubectl("get", "mcs", "-o", names).stdout.split() == ["ModelCatalogSource/huggingface"]
    assert kubectl("get", "mcs", "huggingface", "-o", "name").stdout.strip() == (
        "modelcatalogsource.ai.deckhouse.io/huggingface"
    )


def test_api_resources_list_the_short_names(kubectl: Kubectl) -> None:
    listed = kubectl("api-resources", "--api-group=ai.deckhouse.io", "--no-headers").stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in listed}
    assert set(rows) == {"models", "clustermodels", "modelcatalogsources"}
    assert rows["models"][1] == "mdl"
    assert rows["clustermodels"][1] == "cmdl"
    assert rows["modelcatalogsources"][1] == "mcs"


TINY = repository(
    "acme/tiny",
    {
        "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
        "model.safetensors": safetensors_bytes({"w": ("BF16", (64, 64))}),
    },
)


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [TINY]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def test_the_controller_fills_source_for_a_failed_model_and_a_readable_size_at_ready(
    stack: ModelStack,
) -> None:
    stack.controller()
    stack.create_model("tiny", {"url": "https://huggingface.co/acme/tiny"})
    stack.create_model("missing", {"url": "https://huggingface.co/acme/does-not-exist"})
    ready = stack.wait_phase("tiny", "Ready")
    stack.wait_phase("missing", "Failed")

    assert ready["artifact"]["size"] == size_text(ready["artifact"]["sizeBytes"])
    assert stack.status("missing")["source"] == {"resolvedType": "HuggingFace"}
    rows = {
        line.split()[0]: line.split()
        for line in stack.emulator.kubectl("get", "mdl", "-n", USER_NAMESPACE).stdout.splitlines()[1:]
    }
    assert rows["missing"][1:4] == ["Failed", "HuggingFace", "SourceNotFound"]
    size, unit = ready["artifact"]["size"].split()
    assert rows["tiny"][1:6] == ["Ready", "HuggingFace", size, unit, "ArtifactPublished"]
