"""The module's kinds by their short names (D130), with the venv's kubectl against the emulator
serving the repository's crds/: discovery carries each CRD's shortNames, and kubectl resolves them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

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

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


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
