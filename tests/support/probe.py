"""A throw-away copy of the module chart with probe templates, for testing helpers and checks.

The copy carries `templates/zz-probe.txt`, which renders the template text passed in the values
key `probe` with `tpl`, so one chart copy can evaluate any helper call with the real engine:

    chart.evaluate('{{ include "ai_models.ha_enabled" . }}', values)

Whole manifests (probe workloads, sample monitoring files) can be added as files too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from support.render import KUBE_VERSION, RELEASE_NAME, RenderedChart, copy_chart, render_chart
from support.values import module_values

PROBE_TEMPLATE = "templates/zz-probe.txt"
PROBE_KEY = "probe"


class ProbeChart:
    def __init__(self, directory: Path) -> None:
        self.directory = copy_chart(directory)
        self.add_file(PROBE_TEMPLATE, "{{- with .Values.probe }}{{ tpl . $ }}{{- end }}")

    def add_file(self, relative: str, text: str) -> Path:
        path = self.directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        api_versions: Iterable[str] = (),
        kube_version: str = KUBE_VERSION,
    ) -> RenderedChart:
        return render_chart(
            module_values() if values is None else values,
            api_versions=api_versions,
            kube_version=kube_version,
            chart_dir=self.directory,
        )

    def evaluate(
        self,
        template: str,
        values: Mapping[str, Any] | None = None,
        *,
        api_versions: Iterable[str] = (),
        kube_version: str = KUBE_VERSION,
    ) -> str:
        """Render `template` (template text calling the helpers) in the chart's context."""
        probe_values = copy.deepcopy(dict(module_values() if values is None else values))
        probe_values[PROBE_KEY] = template
        rendered = self.render(probe_values, api_versions=api_versions, kube_version=kube_version)
        return rendered.files[f"{RELEASE_NAME}/{PROBE_TEMPLATE}"]

    def evaluate_yaml(
        self,
        template: str,
        values: Mapping[str, Any] | None = None,
        *,
        api_versions: Iterable[str] = (),
        kube_version: str = KUBE_VERSION,
    ) -> Any:
        """Like `evaluate`, parsed as YAML (helpers that render a block such as `nodeSelector:`)."""
        text = self.evaluate(template, values, api_versions=api_versions, kube_version=kube_version)
        return yaml.safe_load(text)
