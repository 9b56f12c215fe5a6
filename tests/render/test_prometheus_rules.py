"""The module's alerts: Deckhouse conventions, and expressions over metrics the code really exports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ai_models.names import INVENTORY_REMOVAL_BLOCKED_ALERT, INVENTORY_REMOVAL_BLOCKED_METRIC
from support.metrics_contract import PLATFORM_METRICS, exported_metrics, metric_names
from support.render import render_chart
from support.values import module_values

REQUIRED_ALERTS = {
    "D8AIModelsTargetAbsent",
    "D8AIModelsTargetDown",
    "D8AIModelsPodIsNotReady",
    "D8AIModelsStoragePrerequisitesNotSatisfied",
    "D8AIModelsCatalogSourceSyncFailing",
    "D8AIModelsStorageInventoryFailing",
    "D8AIModelsStorageLedgerMissing",
    "D8AIModelsStorageLedgerUnconfirmed",
    INVENTORY_REMOVAL_BLOCKED_ALERT,
}


def rules() -> list[dict[str, Any]]:
    chart = render_chart(module_values())
    return [
        rule
        for obj in chart.of_kind("PrometheusRule")
        for group in obj["spec"]["groups"]
        for rule in group["rules"]
    ]


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
    chart = render_chart(module_values(global_overrides={"enabledModules": ["ai-models", "cert-manager"]}))
    assert chart.of_kind("PrometheusRule") == []


def test_the_mass_removal_alert_fires_on_the_leaders_blocked_inventory_pass() -> None:
    rule = next(rule for rule in rules() if rule["alert"] == INVENTORY_REMOVAL_BLOCKED_ALERT)
    assert metric_names(rule["expr"]) == {INVENTORY_REMOVAL_BLOCKED_METRIC, "d8_ai_models_controller_leader"}
    assert f"{INVENTORY_REMOVAL_BLOCKED_METRIC} == 1" in rule["expr"]
    assert "held back removals" in rule["annotations"]["description"]
    assert rule["labels"]["d8_component"] == "controller"
