"""Security-context, resource and VPA helpers."""

from __future__ import annotations

import pytest

from support.pod_security import restricted_violations
from support.probe import ProbeChart
from support.values import module_values


def pod_spec(chart: ProbeChart, pod_helper: str) -> dict[str, object]:
    pod = chart.evaluate_yaml(f'{{{{ include "{pod_helper}" . }}}}')
    container = chart.evaluate_yaml('{{ include "ai_models.container_security_context_pss_restricted" . }}')
    return {
        **pod,
        "containers": [{"name": "main", "image": "x", **container}],
        "initContainers": [{"name": "init", "image": "x", **container}],
    }


@pytest.mark.parametrize(
    "pod_helper",
    [
        "ai_models.pod_security_context_run_as_user_deckhouse",
        "ai_models.pod_security_context_run_as_user_deckhouse_with_writable_fs",
    ],
)
def test_security_context_helpers_satisfy_pss_restricted(probe_chart: ProbeChart, pod_helper: str) -> None:
    assert restricted_violations(pod_spec(probe_chart, pod_helper)) == []


def test_pod_security_context_runs_as_the_deckhouse_user(probe_chart: ProbeChart) -> None:
    context = probe_chart.evaluate_yaml(
        '{{ include "ai_models.pod_security_context_run_as_user_deckhouse" . }}'
    )
    assert context == {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 64535,
            "runAsGroup": 64535,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    }
    writable = probe_chart.evaluate_yaml(
        '{{ include "ai_models.pod_security_context_run_as_user_deckhouse_with_writable_fs" . }}'
    )
    assert writable["securityContext"] == {**context["securityContext"], "fsGroup": 64535}


def test_container_security_context_is_read_only_and_drops_everything(probe_chart: ProbeChart) -> None:
    context = probe_chart.evaluate_yaml(
        '{{ include "ai_models.container_security_context_pss_restricted" . }}'
    )
    assert context == {
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    }


def test_ephemeral_storage_requests_cover_logs_and_extra_scratch(probe_chart: ProbeChart) -> None:
    assert (
        probe_chart.evaluate('{{ include "ai_models.ephemeral_storage_logs" . }}')
        == "ephemeral-storage: 50Mi"
    )
    assert (
        probe_chart.evaluate('{{ include "ai_models.ephemeral_storage_logs_with_extra" 200 }}')
        == "ephemeral-storage: 250Mi"
    )


@pytest.mark.parametrize(
    ("discovered", "capabilities", "expected"),
    [
        ("1.34.1", "v1.34.0", "InPlaceOrRecreate"),
        ("1.33.0", "v1.30.0", "InPlaceOrRecreate"),
        ("1.32.9", "v1.34.0", "Recreate"),
        (None, "v1.33.2", "InPlaceOrRecreate"),
        (None, "v1.31.0", "Recreate"),
    ],
)
def test_vpa_update_mode_resizes_in_place_from_kubernetes_1_33(
    probe_chart: ProbeChart, discovered: str | None, capabilities: str, expected: str
) -> None:
    values = module_values(global_overrides={"discovery": {"kubernetesVersion": discovered}})
    mode = probe_chart.evaluate(
        '{{ include "ai_models.vpa_update_mode" . }}', values, kube_version=capabilities
    )
    assert mode == expected
