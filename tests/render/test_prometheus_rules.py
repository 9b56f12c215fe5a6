"""The module's alerts: Deckhouse conventions, and expressions over metrics the code really exports."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ai_models.api.metrics import ApiMetrics
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.prerequisites import METRIC as PREREQUISITES_METRIC
from support.render import render_chart
from support.values import module_values

# Metrics of the platform (Prometheus itself, kube-state-metrics) the rules may use.
PLATFORM_METRICS = {"up", "kube_deployment_status_replicas_available"}
REQUIRED_ALERTS = {
    "D8AIModelsTargetAbsent",
    "D8AIModelsTargetDown",
    "D8AIModelsPodIsNotReady",
    "D8AIModelsStoragePrerequisitesNotSatisfied",
    "D8AIModelsCatalogSourceSyncFailing",
}
PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
}
PROMQL_FUNCTIONS = {"absent", "max", "min", "sum", "count", "avg", "rate", "increase", "time", "clamp_min"}


def exported_metrics() -> set[str]:
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    ApiMetrics(registry)
    names = {PREREQUISITES_METRIC}
    for family in registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(f"{family.name}_total")
    return names


def rules() -> list[dict[str, Any]]:
    chart = render_chart(module_values())
    return [
        rule
        for obj in chart.of_kind("PrometheusRule")
        for group in obj["spec"]["groups"]
        for rule in group["rules"]
    ]


def metric_names(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', "", expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_durations = re.sub(r"\[[^\]]*\]", "", without_labels)
    identifiers = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_durations))
    grouped = set(re.findall(r"(?:by|without|on|ignoring)\s*\(([^)]*)\)", without_strings))
    grouping_labels = {label.strip() for group in grouped for label in group.split(",")}
    return identifiers - PROMQL_KEYWORDS - PROMQL_FUNCTIONS - grouping_labels


def test_the_required_alerts_exist() -> None:
    assert {rule["alert"] for rule in rules()} >= REQUIRED_ALERTS


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
def test_alert_follows_deckhouse_conventions(rule: dict[str, Any]) -> None:
    assert rule["alert"].startswith("D8AIModels")
    labels, annotations = rule["labels"], rule["annotations"]
    assert re.fullmatch(r"[1-9]", labels["severity_level"])
    assert labels["tier"] == "cluster"
    assert labels["d8_module"] == "ai-models"
    assert annotations["plk_protocol_version"] == "1"
    assert annotations["plk_markup_format"] == "markdown"
    assert annotations["summary"].strip()
    assert "d8 k " in annotations["description"], "say how to investigate"
    assert re.fullmatch(r"[0-9]+[smh]", rule["for"])
    assert rule["expr"].count("(") == rule["expr"].count(")")


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
def test_expressions_use_only_metrics_that_exist(rule: dict[str, Any]) -> None:
    used = metric_names(rule["expr"])
    assert used, "an alert must watch some metric"
    assert used <= exported_metrics() | PLATFORM_METRICS, (
        f"unknown metrics: {sorted(used - exported_metrics() - PLATFORM_METRICS)}"
    )


def test_rules_are_not_rendered_without_the_prometheus_operator() -> None:
    chart = render_chart(module_values(global_overrides={"enabledModules": ["ai-models"]}))
    assert chart.of_kind("PrometheusRule") == []
