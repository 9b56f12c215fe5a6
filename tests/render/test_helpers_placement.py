"""Placement helpers: node selector and tolerations by strategy, priority class."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from support.probe import ProbeChart
from support.values import MINIMAL_SETTINGS, module_values

SYSTEM = {"node-role.deckhouse.io/system": ""}
STORAGE_PROBLEMS = [
    {"key": "drbd.linbit.com/lost-quorum"},
    {"key": "drbd.linbit.com/force-io-error"},
    {"key": "drbd.linbit.com/ignore-fail-over"},
]
SYSTEM_TOLERATIONS = [
    {"key": "dedicated.deckhouse.io", "operator": "Equal", "value": "ai-models"},
    {"key": "dedicated.deckhouse.io", "operator": "Equal", "value": "system"},
]


def node_selector(chart: ProbeChart, strategy: str, values: dict[str, Any] | None = None) -> Any:
    return chart.evaluate_yaml(f'{{{{ include "ai_models.node_selector" (list . "{strategy}") }}}}', values)


def tolerations(chart: ProbeChart, *args: str, values: dict[str, Any] | None = None) -> Any:
    quoted = " ".join(f'"{arg}"' for arg in args)
    rendered = chart.evaluate_yaml(f'{{{{ include "ai_models.tolerations" (list . {quoted}) }}}}', values)
    return (rendered or {}).get("tolerations")


def counts(**by_role: int) -> dict[str, Any]:
    return module_values(
        global_overrides={"discovery": {"d8SpecificNodeCountByRole": {"system": None, **by_role}}}
    )


def test_system_strategy_selects_system_nodes_when_the_cluster_has_them(probe_chart: ProbeChart) -> None:
    assert node_selector(probe_chart, "system") == {"nodeSelector": SYSTEM}


def test_system_strategy_selects_nothing_without_system_nodes(probe_chart: ProbeChart) -> None:
    assert node_selector(probe_chart, "system", counts()) is None


def test_dedicated_module_nodes_win_over_system_nodes(probe_chart: ProbeChart) -> None:
    selector = node_selector(probe_chart, "system", counts(aiModels=2, system=3))
    assert selector == {"nodeSelector": {"node-role.deckhouse.io/ai-models": ""}}


def test_module_node_selector_setting_wins_over_discovery(probe_chart: ProbeChart) -> None:
    values = module_values({**MINIMAL_SETTINGS, "nodeSelector": {"node.deckhouse.io/group": "ai"}})
    for strategy in ("system", "frontend", "monitoring"):
        assert node_selector(probe_chart, strategy, values) == {
            "nodeSelector": {"node.deckhouse.io/group": "ai"}
        }


def test_frontend_strategy_uses_frontend_nodes_and_never_falls_back_to_system(
    probe_chart: ProbeChart,
) -> None:
    assert node_selector(probe_chart, "frontend", counts(frontend=2)) == {
        "nodeSelector": {"node-role.deckhouse.io/frontend": ""}
    }
    assert node_selector(probe_chart, "frontend", counts(system=2)) is None


def test_monitoring_strategy_falls_back_to_system_nodes(probe_chart: ProbeChart) -> None:
    assert node_selector(probe_chart, "monitoring", counts(system=2)) == {"nodeSelector": SYSTEM}
    assert node_selector(probe_chart, "monitoring", counts(monitoring=1, system=2)) == {
        "nodeSelector": {"node-role.deckhouse.io/monitoring": ""}
    }


def test_master_strategy_prefers_control_plane_and_ignores_the_module_setting(
    probe_chart: ProbeChart,
) -> None:
    values = module_values({**MINIMAL_SETTINGS, "nodeSelector": {"node.deckhouse.io/group": "ai"}})
    assert node_selector(probe_chart, "master", values) == {
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""}
    }
    no_masters = module_values(global_overrides={"discovery": {"clusterMasterCount": 0}})
    assert node_selector(probe_chart, "master", no_masters) == {"nodeSelector": SYSTEM}


def test_unknown_node_selector_strategy_fails(probe_chart: ProbeChart) -> None:
    with pytest.raises(helm_python.HelmRenderError, match='unknown strategy "gpu"'):
        node_selector(probe_chart, "gpu")


def test_system_tolerations_tolerate_module_and_system_taints_and_storage_problems(
    probe_chart: ProbeChart,
) -> None:
    assert tolerations(probe_chart, "system") == SYSTEM_TOLERATIONS + STORAGE_PROBLEMS


def test_module_tolerations_setting_replaces_the_base_strategy(probe_chart: ProbeChart) -> None:
    own = [{"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}]
    values = module_values({**MINIMAL_SETTINGS, "tolerations": own})
    assert tolerations(probe_chart, "system", values=values) == own + STORAGE_PROBLEMS
    assert tolerations(probe_chart, "system", "without-storage-problems", values=values) == own


def test_any_node_tolerates_known_taints_and_custom_toleration_keys(probe_chart: ProbeChart) -> None:
    values = module_values(
        global_overrides={"modules": {"placement": {"customTolerationKeys": ["gpu", "team/x"]}}}
    )
    listed = tolerations(probe_chart, "any-node", "without-storage-problems", values=values)
    assert {"key": "dedicated.deckhouse.io", "operator": "Exists"} in listed
    assert {"key": "node-role.kubernetes.io/control-plane"} in listed
    assert listed[-2:] == [{"key": "gpu", "operator": "Exists"}, {"key": "team/x", "operator": "Exists"}]


def test_any_node_ignores_the_module_tolerations_setting(probe_chart: ProbeChart) -> None:
    own = [{"key": "dedicated", "operator": "Equal", "value": "ai"}]
    values = module_values({**MINIMAL_SETTINGS, "tolerations": own})
    assert own[0] not in tolerations(probe_chart, "any-node", values=values)


def test_wildcard_tolerates_everything_and_nothing_else(probe_chart: ProbeChart) -> None:
    assert tolerations(probe_chart, "wildcard", "with-node-problems") == [{"operator": "Exists"}]


def test_uninitialized_extra_adds_bootstrap_and_node_problem_taints(probe_chart: ProbeChart) -> None:
    listed = tolerations(probe_chart, "any-node", "with-uninitialized", "without-storage-problems")
    assert {"key": "node.deckhouse.io/uninitialized", "operator": "Exists", "effect": "NoSchedule"} in listed
    assert {"key": "node.kubernetes.io/not-ready"} in listed
    assert {
        "key": "node.deckhouse.io/csi-not-bootstrapped",
        "operator": "Exists",
        "effect": "NoSchedule",
    } not in listed
    cloud = module_values(global_overrides={"clusterConfiguration": {"clusterType": "Cloud"}})
    listed = tolerations(probe_chart, "any-node", "with-uninitialized", values=cloud)
    assert {
        "key": "node.deckhouse.io/csi-not-bootstrapped",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in listed


def test_custom_strategy_renders_only_the_requested_extras(probe_chart: ProbeChart) -> None:
    assert tolerations(probe_chart, "custom", "with-no-csi") == [
        {"key": "ToBeDeletedTaint", "operator": "Exists"},
        {"key": "node.deckhouse.io/csi-not-bootstrapped", "operator": "Exists", "effect": "NoSchedule"},
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [(("gpu",), 'unknown strategy "gpu"'), (("system", "with-gpu"), 'unknown extra "with-gpu"')],
)
def test_unknown_toleration_strategy_or_extra_fails(
    probe_chart: ProbeChart, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=message):
        tolerations(probe_chart, *args)


def test_priority_class_renders_a_deckhouse_class_and_rejects_others(probe_chart: ProbeChart) -> None:
    assert probe_chart.evaluate_yaml(
        '{{ include "ai_models.priority_class" (list . "cluster-medium") }}'
    ) == {"priorityClassName": "cluster-medium"}
    with pytest.raises(helm_python.HelmRenderError, match='"high" is not a Deckhouse priority class'):
        probe_chart.evaluate('{{ include "ai_models.priority_class" (list . "high") }}')
