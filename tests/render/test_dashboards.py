"""The module's Grafana dashboard: rendered as a definition, and every panel reads real metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.metrics_contract import PLATFORM_METRICS, exported_metrics, metric_names
from support.paths import REPO_ROOT
from support.render import render_chart
from support.values import module_values

DASHBOARDS = sorted((REPO_ROOT / "monitoring" / "grafana-dashboards").glob("*/*.json"))
WITH_GRAFANA = {"enabledModules": ["ai-models", "cert-manager", "operator-prometheus-crd", "prometheus-crd"]}


def panels(path: Any) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["panels"]
    return loaded


def test_the_overview_dashboard_is_rendered_into_the_ai_models_folder() -> None:
    definitions = render_chart(module_values(global_overrides=WITH_GRAFANA)).of_kind(
        "GrafanaDashboardDefinition"
    )
    assert [item["metadata"]["name"] for item in definitions] == ["d8-ai-models-ai-models-overview"]
    assert definitions[0]["spec"]["folder"] == "Ai Models"
    assert json.loads(definitions[0]["spec"]["definition"])["uid"] == "d8-ai-models"


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda path: path.name)
def test_every_panel_reads_metrics_the_module_exports(path: Any) -> None:
    found = panels(path)
    assert found
    assert len({panel["id"] for panel in found}) == len(found)
    for panel in found:
        assert panel["datasource"]["uid"] == "${ds_prometheus}"
        for target in panel["targets"]:
            used = metric_names(target["expr"])
            assert used, panel["title"]
            unknown = used - exported_metrics() - PLATFORM_METRICS
            assert not unknown, f"{panel['title']}: {sorted(unknown)}"
