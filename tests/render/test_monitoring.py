"""templates/monitoring.yaml: PrometheusRules and Grafana dashboards from monitoring/, on a chart copy
with sample files (the real rules and dashboards arrive with the components)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import helm_python
import pytest

from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, review
from support.probe import ProbeChart
from support.scenarios import scenario
from support.values import module_values

RULES = """\
- name: d8.ai-models.availability
  rules:
  - alert: D8AIModelsControllerDown
    expr: absent(up{job="ai-models-controller"} == 1)
    for: __SCRAPE_INTERVAL_X_2__
    labels:
      severity_level: "4"
      tier: cluster
    annotations:
      plk_protocol_version: "1"
      summary: The ai-models controller is down.
      d8_ignore_on_update: "true"
  - record: ai_models:publications:rate5m
    expr: sum(rate(d8_ai_models_publications_total[5m]))
"""
TEMPLATED_RULES = """\
- name: d8.ai-models.storage
  interval: __SCRAPE_INTERVAL__
  rules:
  - alert: D8AIModelsStoragePrerequisitesNotSatisfied
    expr: max(d8_ai_models_storage_prerequisites_satisfied) == 0
    labels:
      d8_module: {{ .Chart.Name }}
    annotations:
      summary: Mode {{`{{ $labels.mode }}`}} cannot deliver models.
"""
DASHBOARD = {"title": "AI models", "panels": [], "schemaVersion": 39}
WITHOUT_MONITORING = ["ai-models", "cert-manager"]
# DEFAULT_GLOBAL enables operator-prometheus-crd only; dashboards also need prometheus-crd.
WITH_MONITORING = [*WITHOUT_MONITORING, "operator-prometheus-crd", "prometheus-crd"]


def monitoring_values() -> dict[str, Any]:
    return module_values(global_overrides={"enabledModules": WITH_MONITORING})


@pytest.fixture
def monitored_chart(chart_copy: ProbeChart) -> ProbeChart:
    # The helper is proven on sample files alone; the module's own rules have their own tests.
    shutil.rmtree(chart_copy.directory / "monitoring", ignore_errors=True)
    chart_copy.add_file("monitoring/prometheus-rules/availability.yaml", RULES)
    chart_copy.add_file("monitoring/prometheus-rules/storage/prerequisites.tpl", TEMPLATED_RULES)
    chart_copy.add_file("monitoring/grafana-dashboards/ai-models/overview_v2.json", json.dumps(DASHBOARD))
    return chart_copy


def rules(chart: ProbeChart, values: dict[str, Any] | None = None, api_versions: tuple[str, ...] = ()) -> Any:
    return chart.render(values, api_versions=api_versions).of_kind("PrometheusRule")


def test_every_rule_file_becomes_a_prometheus_rule_in_the_module_namespace(
    monitored_chart: ProbeChart,
) -> None:
    rendered = {rule["metadata"]["name"]: rule for rule in rules(monitored_chart)}
    assert sorted(rendered) == ["ai-models-availability", "ai-models-storage-prerequisites"]
    for rule in rendered.values():
        assert rule["metadata"]["namespace"] == "d8-ai-models"
        assert rule["metadata"]["labels"] == {
            "heritage": "deckhouse",
            "module": "ai-models",
            "prometheus": "main",
            "component": "rules",
        }
        validate_object(rule)


def test_scrape_interval_placeholders_follow_the_discovered_interval(monitored_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"discovery": {"prometheusScrapeInterval": 15}})
    rendered = {rule["metadata"]["name"]: rule for rule in rules(monitored_chart, values)}
    availability = rendered["ai-models-availability"]["spec"]["groups"][0]["rules"][0]
    assert availability["for"] == "30s"
    assert rendered["ai-models-storage-prerequisites"]["spec"]["groups"][0]["interval"] == "15s"
    default = {rule["metadata"]["name"]: rule for rule in rules(monitored_chart)}
    assert default["ai-models-availability"]["spec"]["groups"][0]["rules"][0]["for"] == "60s"


def test_tpl_rule_files_are_rendered_and_keep_escaped_prometheus_templates(
    monitored_chart: ProbeChart,
) -> None:
    rendered = {rule["metadata"]["name"]: rule for rule in rules(monitored_chart)}
    rule = rendered["ai-models-storage-prerequisites"]["spec"]["groups"][0]["rules"][0]
    assert rule["labels"] == {"d8_module": "ai-models"}
    assert rule["annotations"]["summary"] == "Mode {{ $labels.mode }} cannot deliver models."


def test_alerts_marked_d8_ignore_on_update_are_muted_during_updates(monitored_chart: ProbeChart) -> None:
    rendered = {rule["metadata"]["name"]: rule for rule in rules(monitored_chart)}
    alert, record = rendered["ai-models-availability"]["spec"]["groups"][0]["rules"]
    assert alert["expr"] == (
        '(absent(up{job="ai-models-controller"} == 1)) and ON() '
        "((max(d8_is_updating) != 1) or ON() absent(d8_is_updating))"
    )
    assert record["expr"] == "sum(rate(d8_ai_models_publications_total[5m]))"


def test_rules_need_the_prometheus_operator_crds(monitored_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"enabledModules": WITHOUT_MONITORING})
    assert rules(monitored_chart, values) == []
    served = rules(monitored_chart, values, api_versions=("monitoring.coreos.com/v1/PrometheusRule",))
    assert len(served) == 2


def test_a_rule_file_that_is_not_a_list_of_groups_fails_naming_the_file(chart_copy: ProbeChart) -> None:
    chart_copy.add_file("monitoring/prometheus-rules/broken.yaml", "alert: NotAGroupList\n")
    with pytest.raises(
        helm_python.HelmRenderError, match=r"monitoring/prometheus-rules/broken\.yaml must be a YAML list"
    ):
        chart_copy.render()


def test_dashboards_become_grafana_dashboard_definitions_in_their_folder(monitored_chart: ProbeChart) -> None:
    dashboards = monitored_chart.render(monitoring_values()).of_kind("GrafanaDashboardDefinition")
    assert len(dashboards) == 1
    dashboard = dashboards[0]
    assert dashboard["apiVersion"] == "deckhouse.io/v1"
    assert dashboard["metadata"] == {
        "name": "d8-ai-models-ai-models-overview-v2",
        "labels": {
            "heritage": "deckhouse",
            "module": "ai-models",
            "prometheus.deckhouse.io/grafana-dashboard": "",
        },
    }
    assert dashboard["spec"]["folder"] == "Ai Models"
    assert json.loads(dashboard["spec"]["definition"]) == DASHBOARD
    validate_object(dashboard)


def test_dashboards_need_the_grafana_dashboard_crd(monitored_chart: ProbeChart) -> None:
    values = module_values(
        global_overrides={"enabledModules": [*WITHOUT_MONITORING, "operator-prometheus-crd"]}
    )
    assert monitored_chart.render(values).of_kind("GrafanaDashboardDefinition") == []
    served = monitored_chart.render(values, api_versions=("deckhouse.io/v1/GrafanaDashboardDefinition",))
    assert len(served.of_kind("GrafanaDashboardDefinition")) == 1


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        ("monitoring/grafana-dashboards/loose.json", "{}", "must be in a folder"),
        ("monitoring/grafana-dashboards/ai-models/broken.json", "{not json", "is not valid JSON"),
    ],
)
def test_misplaced_or_invalid_dashboards_fail(
    chart_copy: ProbeChart, path: str, content: str, message: str
) -> None:
    chart_copy.add_file(path, content)
    with pytest.raises(helm_python.HelmRenderError, match=message):
        chart_copy.render(monitoring_values())


def test_monitoring_objects_pass_the_reviewer_checks(monitored_chart: ProbeChart) -> None:
    values = monitoring_values()
    rendered = monitored_chart.render(values)
    monitoring = rendered.of_kind("PrometheusRule") + rendered.of_kind("GrafanaDashboardDefinition")
    assert len(monitoring) == 3
    assert review(monitoring, ClusterExpectations.from_values(values)) == []


def test_monitoring_crds_absent_scenario_renders_no_monitoring_objects(monitored_chart: ProbeChart) -> None:
    present = scenario("minimal").render(chart_dir=monitored_chart.directory)
    absent = scenario("monitoring-crds-absent").render(chart_dir=monitored_chart.directory)
    assert len(present.of_kind("PrometheusRule")) == 2
    assert absent.of_kind("PrometheusRule") == []
    assert absent.of_kind("GrafanaDashboardDefinition") == []
