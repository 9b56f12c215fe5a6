"""The reviewer checks themselves, proven on probe workloads rendered by the real engine: a probe
written with the module helpers passes in every scenario, a probe with one of every mistake is
reported finding by finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, find_cluster_local, review
from support.probe import ProbeChart
from support.render import RenderedChart, to_multidoc
from support.scenarios import Scenario, load_scenarios, scenario

PROBES = Path(__file__).parent / "probes"
WORKLOAD_KINDS = ["CronJob", "DaemonSet", "Deployment"]

# What review() must say about each object of the noncompliant probe, in order.
EXPECTED_FINDINGS_BY_OBJECT: list[tuple[str, list[str]]] = [
    (
        "Deployment/default/bad-api",
        [
            "label heritage='deckhouse' missing (found 'helm')",
            "label module='ai-models' missing (found None)",
            "namespaced object must be in d8-ai-models, not 'default'",
            "pod references SecurityPolicyException missing-exception, which is not rendered",
            "PSS restricted: pod: hostNetwork must not be true",
            "PSS restricted: pod: securityContext.runAsUser must not be 0",
            "PSS restricted: pod: volume host has type hostPath",
            "PSS restricted: container init: runAsNonRoot must be true (pod or container)",
            "PSS restricted: container init: seccompProfile.type must be RuntimeDefault or "
            "Localhost, not None",
            "PSS restricted: container api: privileged must not be true",
            "PSS restricted: container api: allowPrivilegeEscalation must be false",
            "PSS restricted: container api: runAsNonRoot must be true (pod or container)",
            "PSS restricted: container api: seccompProfile.type must be RuntimeDefault or Localhost, "
            "not None",
            "PSS restricted: container api: capabilities.drop must contain ALL",
            "PSS restricted: container api: capability SYS_ADMIN must not be added",
            "pod runAsUser/runAsGroup must be 64535:64535 or 65534:65534, not 0:None",
            "container api must set readOnlyRootFilesystem: true",
            "container api needs a livenessProbe with exactly one handler",
            "container api needs a readinessProbe with exactly one handler",
            "container worker needs a startupProbe on httpGet /healthz",
            "container init has no resources.requests for ephemeral-storage, cpu, memory",
            "container api has no resources.requests for ephemeral-storage, memory",
            "container worker has no resources.requests for ephemeral-storage, cpu, memory",
            "priorityClassName must be a Deckhouse class, not 'high'",
            "nodeSelector must be {'node-role.deckhouse.io/system': ''} (system placement), not "
            "{'kubernetes.io/os': 'linux'}",
            "tolerations must include {'key': 'dedicated.deckhouse.io', 'operator': 'Equal', "
            "'value': 'ai-models'} (system placement)",
            "tolerations must include {'key': 'dedicated.deckhouse.io', 'operator': 'Equal', "
            "'value': 'system'} (system placement)",
            "imagePullSecrets must include ai-models-module-registry",
            "container init image 'registry.example.com/deckhouse/modules/ai-models:latest' must "
            "be a module or common image by digest",
            "container api image 'docker.io/library/nginx:1.27' must be a module or common image by digest",
            "container api must not use imagePullPolicy: Always",
            "container api port 80 must be above 1024",
            "container api has duplicate env names",
            "revisionHistoryLimit must be set to 2 or less, not 10",
            "no PodDisruptionBudget selects its pods",
            "VerticalPodAutoscaler has no containerPolicies for api, worker",
        ],
    ),
    (
        "Job/d8-ai-models/bad-job",
        [
            "duplicate container names",
        ],
    ),
    (
        "Service/d8-ai-models/bad-api",
        [
            "port http must use a named targetPort, not 8080",
        ],
    ),
    (
        "VerticalPodAutoscaler/default/bad-api",
        [
            "namespaced object must be in d8-ai-models, not 'default'",
            "updatePolicy.updateMode must be one of ['InPlaceOrRecreate', 'Initial', 'Off', "
            "'Recreate'], not 'Auto'",
        ],
    ),
    (
        "PodDisruptionBudget/d8-ai-models/bad-api",
        [
            "must not carry the Helm hook annotation helm.sh/hook",
            "must set minAvailable or maxUnavailable",
        ],
    ),
    (
        "ClusterRole/d8-ai-models/d8:ai-models:bad",
        [
            "cluster-scoped object must not set a namespace (d8-ai-models)",
        ],
    ),
]
EXPECTED_FINDINGS = [
    f"{obj}: {message}" for obj, messages in EXPECTED_FINDINGS_BY_OBJECT for message in messages
]


@pytest.fixture(scope="module")
def compliant_chart(tmp_path_factory: pytest.TempPathFactory) -> ProbeChart:
    chart = ProbeChart(tmp_path_factory.mktemp("compliant") / "ai-models")
    chart.add_file("templates/zz-compliant-workloads.yaml", (PROBES / "compliant-workloads.yaml").read_text())
    return chart


@pytest.fixture(scope="module")
def noncompliant(tmp_path_factory: pytest.TempPathFactory) -> RenderedChart:
    chart = ProbeChart(tmp_path_factory.mktemp("noncompliant") / "ai-models")
    chart.add_file(
        "templates/zz-noncompliant-workloads.yaml", (PROBES / "noncompliant-workloads.yaml").read_text()
    )
    return scenario("minimal").render(chart_dir=chart.directory)


@pytest.mark.parametrize("item", load_scenarios(), ids=lambda item: item.name)
def test_workloads_built_from_the_helpers_pass_every_check(
    compliant_chart: ProbeChart, item: Scenario
) -> None:
    rendered = item.render(chart_dir=compliant_chart.directory)
    assert sorted({obj["kind"] for obj in rendered.objects} & set(WORKLOAD_KINDS)) == WORKLOAD_KINDS
    for obj in rendered.objects:
        validate_object(obj)
    assert review(rendered.objects, ClusterExpectations.from_values(item.values())) == []


def test_compliant_workloads_follow_a_custom_cluster_domain(compliant_chart: ProbeChart) -> None:
    rendered = scenario("custom-cluster-domain").render(chart_dir=compliant_chart.directory)
    text = to_multidoc(rendered)
    assert "probe-api.d8-ai-models.svc.corp.local" in text
    assert find_cluster_local(text) == []


def test_every_mistake_is_reported_and_nothing_else(noncompliant: RenderedChart) -> None:
    findings = review(noncompliant.objects, ClusterExpectations.from_values(scenario("minimal").values()))
    assert findings == EXPECTED_FINDINGS


def test_noncompliant_probe_is_schema_valid_so_the_findings_are_the_checks_own(
    noncompliant: RenderedChart,
) -> None:
    for obj in noncompliant.objects:
        validate_object(obj)


def test_hard_coded_cluster_local_is_found(noncompliant: RenderedChart) -> None:
    assert find_cluster_local(to_multidoc(noncompliant)) == [
        "value: http://bad-api.d8-ai-models.svc.cluster.local"
    ]


def test_missing_vpa_is_reported_only_when_the_vpa_module_is_on(compliant_chart: ProbeChart) -> None:
    rendered = scenario("minimal").render(chart_dir=compliant_chart.directory)
    without_vpas = [obj for obj in rendered.objects if obj["kind"] != "VerticalPodAutoscaler"]
    findings = review(without_vpas, ClusterExpectations.from_values(scenario("minimal").values()))
    assert "Deployment/d8-ai-models/probe-api: no VerticalPodAutoscaler targets it" in findings
    assert "DaemonSet/d8-ai-models/probe-node: no VerticalPodAutoscaler targets it" in findings
    assert (
        "Deployment/d8-ai-models/probe-api: container api has no resources.requests for cpu, memory"
        in findings
    )
    vpa_off = scenario("vpa-absent")
    assert (
        review(
            vpa_off.render(chart_dir=compliant_chart.directory).objects,
            ClusterExpectations.from_values(vpa_off.values()),
        )
        == []
    )


def test_unwaived_host_path_is_reported_when_the_exception_is_missing(compliant_chart: ProbeChart) -> None:
    rendered = scenario("minimal").render(chart_dir=compliant_chart.directory)
    without_exception = [obj for obj in rendered.objects if obj["kind"] != "SecurityPolicyException"]
    findings = review(without_exception, ClusterExpectations.from_values(scenario("minimal").values()))
    assert findings == [
        "DaemonSet/d8-ai-models/probe-node: pod references SecurityPolicyException probe-node, "
        "which is not rendered",
        "DaemonSet/d8-ai-models/probe-node: PSS restricted: pod: volume kubelet has type hostPath",
    ]


def webhook_configuration(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": "probe",
            "labels": {"heritage": "deckhouse", "module": "ai-models"},
            "annotations": annotations,
        },
        "webhooks": [],
    }


def test_a_webhook_configuration_without_an_order_for_werf_is_reported() -> None:
    expectations = ClusterExpectations.from_values(scenario("minimal").values())

    assert review([webhook_configuration({})], expectations) == [
        "MutatingWebhookConfiguration/probe: needs a werf.io/weight annotation or one prefixed "
        "werf.io/deploy-dependency-"
    ]
    assert review([webhook_configuration({"werf.io/weight": "10"})], expectations) == []


def test_a_webhook_configuration_waiting_for_an_object_the_chart_does_not_render_is_reported() -> None:
    expectations = ClusterExpectations.from_values(scenario("minimal").values())
    waits = {
        "werf.io/deploy-dependency-server": "state=ready,kind=Deployment,group=apps,version=v1,name=server"
    }
    server = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "server", "namespace": "d8-ai-models"},
    }

    assert review([webhook_configuration(waits)], expectations) == [
        "MutatingWebhookConfiguration/probe: werf.io/deploy-dependency-server waits for Deployment "
        "d8-ai-models/server, which is not rendered"
    ]
    assert [
        finding
        for finding in review([webhook_configuration(waits), server], expectations)
        if finding.startswith("MutatingWebhookConfiguration")
    ] == []
