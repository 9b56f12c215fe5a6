"""The one wrapper around helm-python-sdk's render call.

`Chart.render()` does not let us set the Kubernetes version or the API versions the templates
see through `.Capabilities`, but the C ABI behind it does; this module is the only place that
touches that private call, so an SDK upgrade breaks exactly one file.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import yaml
from helm_python import _native

from support.paths import REPO_ROOT

KUBE_VERSION = "v1.34.0"
# What Helm loads from the repository root (everything else is .helmignore-d or not a chart part).
CHART_PARTS = ("Chart.yaml", ".helmignore", "templates", "monitoring", "charts")
RELEASE_NAME = "ai-models"
RELEASE_NAMESPACE = "d8-ai-models"
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class RenderedChart:
    """Rendered manifests, parsed, keyed by template path."""

    files: dict[str, str]
    objects: list[dict[str, Any]] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj.get("kind") == kind]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        for obj in self.of_kind(kind):
            meta = obj.get("metadata", {})
            if meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace):
                return obj
        raise KeyError(f"{kind}/{name} not rendered")


def render_chart(
    values: Mapping[str, Any],
    *,
    api_versions: Iterable[str] = (),
    kube_version: str = KUBE_VERSION,
    chart_dir: Path = REPO_ROOT,
) -> RenderedChart:
    """Render the module chart (the repository root, or a copy of it) with the real Helm engine.

    Raises `helm_python.HelmError` subclasses (e.g. `HelmRenderError` for a template `fail`).
    """
    chart = helm_python.Chart.load(str(chart_dir))
    options = {
        "name": RELEASE_NAME,
        "namespace": RELEASE_NAMESPACE,
        "kube_version": kube_version,
        "api_versions": list(api_versions),
        "is_install": True,
    }
    raw = _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options))
    files: dict[str, str] = json.loads(raw)
    objects: list[dict[str, Any]] = []
    for path in sorted(files):
        if not path.endswith((".yaml", ".yml")):
            continue
        # libyaml's safe loader: the pure-Python one dominated the suite's time (~10 ms per workload).
        objects.extend(doc for doc in yaml.load_all(files[path], Loader=_SAFE_LOADER) if doc)
    return RenderedChart(files=files, objects=objects)


def copy_chart(destination: Path) -> Path:
    """Copy the parts of the module chart Helm reads into `destination` and return it.

    Tests add probe templates or sample monitoring files to the copy, never to the repository.
    """
    destination.mkdir(parents=True, exist_ok=True)
    for part in CHART_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            shutil.copytree(source, destination / part, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, destination / part)
    return destination


def to_multidoc(rendered: RenderedChart) -> str:
    """The rendered chart as `helm template` prints it: documents with `# Source:` comments."""
    chunks: list[str] = []
    for path in sorted(rendered.files):
        for document in rendered.files[path].split("\n---"):
            body = document.strip().removeprefix("---").strip()
            if body and any(not line.lstrip().startswith("#") for line in body.splitlines()):
                chunks.append(f"---\n# Source: {path}\n{body}\n")
    return "".join(chunks)
