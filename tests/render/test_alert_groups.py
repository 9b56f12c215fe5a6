"""The alerts' grouping annotations, as Deckhouse's alert processing reads them (D129).

Deckhouse modules group related alerts with a pair of annotations: `plk_create_group_if_not_exists__<key>`
creates a group alert and `plk_grouped_by__<key>` puts the alert into it. The value is the group's
name followed by label matchers: `name=value` fixes a label of the group, `name=~label` copies the
alert's label (e.g. deckhouse/deckhouse modules/*/monitoring/prometheus-rules: cni-cilium,
node-manager, registry). DMT's alert-grouping-annotations rule refuses an alert grouped into itself.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from support.render import render_chart
from support.values import module_values

CREATE = "plk_create_group_if_not_exists__"
GROUPED_BY = "plk_grouped_by__"
KEY_SUFFIX = re.compile(r"d8_ai_models_[a-z_]+")
MATCHER = re.compile(r"(?P<label>[a-z_][a-z0-9_]*)=(?P<copy>~)?(?P<value>[A-Za-z0-9_.-]+)")


def rule_groups() -> list[dict[str, Any]]:
    chart = render_chart(module_values())
    return [group for obj in chart.of_kind("PrometheusRule") for group in obj["spec"]["groups"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def with_prefix(annotations: dict[str, str], prefix: str) -> dict[str, str]:
    return {key.removeprefix(prefix): value for key, value in annotations.items() if key.startswith(prefix)}


def grouping(rule: dict[str, Any]) -> tuple[str, str]:
    """The (key suffix, value) of the alert's grouping pair, checking that the pair is whole."""
    created = with_prefix(rule["annotations"], CREATE)
    grouped = with_prefix(rule["annotations"], GROUPED_BY)
    assert len(created) == 1, f"{rule['alert']}: one {CREATE}<key> annotation, found {sorted(created)}"
    assert created == grouped, f"{rule['alert']}: {CREATE} and {GROUPED_BY} must share the key and value"
    ((suffix, value),) = created.items()
    return suffix, value


@pytest.mark.parametrize("rule", alerts(), ids=lambda rule: rule["alert"])
def test_every_alert_is_grouped_the_deckhouse_way(rule: dict[str, Any]) -> None:
    suffix, value = grouping(rule)
    assert KEY_SUFFIX.fullmatch(suffix), f"{suffix!r}: keys are the module's own (d8_ai_models_<area>)"
    name, *matchers = (part.strip() for part in value.split(","))
    assert re.fullmatch(r"D8AIModels[A-Z][A-Za-z]+", name)
    assert name != rule["alert"], "an alert grouped into itself is dropped (DMT alert-grouping-annotations)"
    parsed = [MATCHER.fullmatch(matcher) for matcher in matchers]
    assert all(parsed), f"matchers must be label=value or label=~label: {matchers}"
    fixed = {found["label"]: found["value"] for found in parsed if found and not found["copy"]}
    copied = {found["label"]: found["value"] for found in parsed if found and found["copy"]}
    assert fixed.get("prometheus") == "deckhouse"
    for label, source in copied.items():
        # A copied label the alert lacks leaves the group without it (kubernetes comes from Prometheus).
        assert source in rule["labels"] or source == "kubernetes", f"{label}=~{source}"


def test_each_rule_group_has_one_alert_group_and_no_group_is_named_like_an_alert() -> None:
    names = {rule["alert"] for rule in alerts()}
    seen: dict[str, str] = {}
    for group in rule_groups():
        values = {grouping(rule)[1] for rule in group["rules"] if "alert" in rule}
        assert len(values) == 1, f"{group['name']}: its alerts go into one group, found {sorted(values)}"
        (value,) = values
        name = value.split(",", 1)[0]
        assert name not in names, f"group {name} is also an alert's name"
        assert seen.setdefault(name, group["name"]) == group["name"], f"{name} is used by two rule groups"
