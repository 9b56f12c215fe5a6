"""High-availability helpers and the precedence of the three values that decide HA."""

from __future__ import annotations

from typing import Any

import pytest

from support.probe import ProbeChart
from support.values import MINIMAL_SETTINGS, module_values


def values_with(module_ha: bool | None, global_ha: bool | None, control_plane_ha: bool) -> dict[str, Any]:
    settings = dict(MINIMAL_SETTINGS)
    if module_ha is not None:
        settings["highAvailability"] = module_ha
    overrides: dict[str, Any] = {"discovery": {"clusterControlPlaneIsHighlyAvailable": control_plane_ha}}
    if global_ha is not None:
        overrides["highAvailability"] = global_ha
    return module_values(settings, global_overrides=overrides)


@pytest.mark.parametrize(
    ("module_ha", "global_ha", "control_plane_ha", "expected"),
    [
        (None, None, False, False),
        (None, None, True, True),
        (None, True, False, True),
        (None, False, True, False),
        (True, False, False, True),
        (False, True, True, False),
    ],
    ids=[
        "nothing-set",
        "control-plane-ha",
        "global-on",
        "global-off-beats-control-plane",
        "module-on-beats-global",
        "module-off-beats-all",
    ],
)
def test_ha_is_decided_by_module_then_global_then_control_plane(
    probe_chart: ProbeChart,
    module_ha: bool | None,
    global_ha: bool | None,
    control_plane_ha: bool,
    expected: bool,
) -> None:
    values = values_with(module_ha, global_ha, control_plane_ha)
    assert probe_chart.evaluate('{{ include "ai_models.ha_enabled" . }}', values) == (
        "true" if expected else ""
    )
    assert probe_chart.evaluate('{{ include "ai_models.is_ha_to_value" (list . 3 1) }}', values) == (
        "3" if expected else "1"
    )


def test_ha_runs_two_replicas_with_a_rolling_update_that_never_surges(probe_chart: ProbeChart) -> None:
    block = probe_chart.evaluate_yaml(
        '{{ include "ai_models.deployment_strategy_and_replicas_for_ha" . }}', values_with(True, None, False)
    )
    assert block == {
        "replicas": 2,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
    }


def test_without_ha_one_replica_and_the_default_strategy(probe_chart: ProbeChart) -> None:
    block = probe_chart.evaluate_yaml(
        '{{ include "ai_models.deployment_strategy_and_replicas_for_ha" . }}', values_with(False, None, False)
    )
    assert block == {"replicas": 1}


def test_ha_spreads_pods_across_hosts_by_their_labels(probe_chart: ProbeChart) -> None:
    template = (
        '{{ include "ai_models.pod_anti_affinity_for_ha" (list . (dict "app" "api" "component" "x")) }}'
    )
    block = probe_chart.evaluate_yaml(template, values_with(True, None, False))
    assert block == {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "api", "component": "x"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    }
    assert probe_chart.evaluate(template, values_with(False, None, False)) == ""
