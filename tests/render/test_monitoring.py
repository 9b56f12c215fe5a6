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


# What lib-helm's helm_lib_prometheus_rules labels every rule object with (helm_lib_module_labels
# with app: prometheus, prometheus: main, component: rules).
RULE_LABELS = {
    "heritage": "deckhouse",
    "module": "ai-models",
    "app": "prometheus",
    "prometheus": "main",
    "component": "rules",
}
OBSERVABILITY_RULES_KIND = "observability.deckhouse.io/v1alpha1/ClusterObservabilityMetricsRulesGroup"


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
        assert rule["metadata"]["labels"] == RULE_LABELS
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
            # lib-helm marks its definitions so the observability module does not convert them:
            # it renders their ClusterObservabilityDashboard itself.
            "observability.deckhouse.io/skip-dashboard-conversion": "",
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


def observability_values(*, discovered: bool = True) -> dict[str, Any]:
    return module_values(
        global_overrides={
            "enabledModules": [*WITH_MONITORING, "observability"],
            "discovery": {"apiVersions": [OBSERVABILITY_RULES_KIND] if discovered else []},
        }
    )


def test_with_the_observability_module_each_rule_group_is_a_cluster_rules_group(
    monitored_chart: ProbeChart,
) -> None:
    """lib-helm: one ClusterObservabilityMetricsRulesGroup per group, <file name>-<index>, the group
    without its name as spec, and no PrometheusRule."""
    rendered = monitored_chart.render(observability_values())
    assert rendered.of_kind("PrometheusRule") == []
    groups = {
        item["metadata"]["name"]: item for item in rendered.of_kind("ClusterObservabilityMetricsRulesGroup")
    }
    assert sorted(groups) == ["ai-models-availability-0", "ai-models-storage-prerequisites-0"]
    availability = groups["ai-models-availability-0"]
    assert availability["apiVersion"] == "observability.deckhouse.io/v1alpha1"
    assert availability["metadata"] == {"name": "ai-models-availability-0", "labels": RULE_LABELS}
    assert set(availability["spec"]) == {"rules"}
    assert [rule.get("alert", rule.get("record")) for rule in availability["spec"]["rules"]] == [
        "D8AIModelsControllerDown",
        "ai_models:publications:rate5m",
    ]
    # The same processing as for a PrometheusRule: placeholders and the update mute.
    assert availability["spec"]["rules"][0]["for"] == "60s"
    assert "d8_is_updating" in availability["spec"]["rules"][0]["expr"]
    assert groups["ai-models-storage-prerequisites-0"]["spec"]["interval"] == "30s"
    for group in groups.values():
        validate_object(group)


def test_rules_stay_prometheus_rules_until_deckhouse_discovers_the_observability_kind(
    monitored_chart: ProbeChart,
) -> None:
    """lib-helm needs both: the module enabled and its kind in global.discovery.apiVersions."""
    rendered = monitored_chart.render(observability_values(discovered=False))
    assert rendered.of_kind("ClusterObservabilityMetricsRulesGroup") == []
    assert len(rendered.of_kind("PrometheusRule")) == 2


def test_with_the_observability_module_dashboards_are_also_observability_dashboards(
    monitored_chart: ProbeChart,
) -> None:
    rendered = monitored_chart.render(observability_values(discovered=False))
    assert len(rendered.of_kind("GrafanaDashboardDefinition")) == 1
    dashboards = rendered.of_kind("ClusterObservabilityDashboard")
    assert len(dashboards) == 1
    dashboard = dashboards[0]
    assert dashboard["apiVersion"] == "observability.deckhouse.io/v1alpha1"
    assert dashboard["metadata"] == {
        "name": "d8-ai-models-ai-models-overview-v2",
        "annotations": {"metadata.deckhouse.io/category": "Ai Models"},
        "labels": {
            "heritage": "deckhouse",
            "module": "ai-models",
            "observability.deckhouse.io/dashboard-origin": "module",
        },
    }
    assert json.loads(dashboard["spec"]["definition"]) == DASHBOARD
    validate_object(dashboard)


def test_without_the_observability_module_there_are_no_observability_objects(
    monitored_chart: ProbeChart,
) -> None:
    rendered = monitored_chart.render(monitoring_values())
    kinds = {item["kind"] for item in rendered.objects}
    assert not kinds & {"ClusterObservabilityMetricsRulesGroup", "ClusterObservabilityDashboard"}


def test_the_observability_scenario_renders_the_module_rules_in_the_observability_form() -> None:
    rendered = scenario("observability").render()
    assert rendered.of_kind("PrometheusRule") == []
    groups = rendered.of_kind("ClusterObservabilityMetricsRulesGroup")
    assert groups
    assert {group["metadata"]["name"].rsplit("-", 1)[0] for group in groups} == {
        "ai-models-catalog",
        "ai-models-components",
        "ai-models-storage",
    }
    assert len(rendered.of_kind("ClusterObservabilityDashboard")) == 1
    for item in [*groups, *rendered.of_kind("ClusterObservabilityDashboard")]:
        validate_object(item)
