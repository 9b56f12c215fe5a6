"""Every value scenario renders with the real engine into valid manifests a reviewer accepts."""

from __future__ import annotations

from functools import cache

import pytest

from support.manifest_schemas import validate_object
from support.manifests import DEFAULT_CLUSTER_DOMAIN, ClusterExpectations, find_cluster_local, review
from support.render import RenderedChart, to_multidoc
from support.scenarios import Scenario, load_scenarios, scenario

SCENARIOS = load_scenarios()
# Cluster situations the test bed must always cover (see the module's design).
REQUIRED = {
    "minimal",
    "ha-module-setting",
    "ha-global-discovery",
    "https-custom-certificate",
    "https-cert-manager",
    "https-disabled",
    "https-only-in-uri",
    "gateway-api-present",
    "gateway-api-absent",
    "delivery-node-cache",
    "custom-placement",
    "no-system-nodes",
    "monitoring-crds-absent",
    "custom-cluster-domain",
    # Deckhouse versions on both sides of the 1.78 role model, an egress proxy, the observability
    # module (issue 14).
    "deckhouse-1-75",
    "deckhouse-1-78",
    "deckhouse-dev",
    "proxy",
    "observability",
    # The globals as DKP 1.75, 1.77 and 1.78 fill them: module names without -crd shims (issue 24).
    "platform-1-75",
    "platform-1-77",
    "platform-1-78",
}
PLATFORM_SCENARIOS = ("platform-1-75", "platform-1-77", "platform-1-78")


# Where the default domain would be wrong, it must not appear in any rendered byte.
CUSTOM_DOMAIN = tuple(
    item
    for item in SCENARIOS
    if ClusterExpectations.from_values(item.values()).cluster_domain != DEFAULT_CLUSTER_DOMAIN
)


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def ids(item: Scenario) -> str:
    return item.name


def test_the_required_cluster_situations_have_scenarios() -> None:
    assert {item.name for item in SCENARIOS} >= REQUIRED


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_scenario_renders_objects(item: Scenario) -> None:
    assert rendered(item.name).objects, f"{item.name} rendered nothing"


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_every_rendered_object_matches_its_schema(item: Scenario) -> None:
    for obj in rendered(item.name).objects:
        validate_object(obj)


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_rendered_objects_pass_the_reviewer_checks(item: Scenario) -> None:
    expectations = ClusterExpectations.from_values(item.values())
    assert review(rendered(item.name).objects, expectations) == []


@pytest.mark.parametrize("item", CUSTOM_DOMAIN, ids=ids)
def test_nothing_hard_codes_the_default_cluster_domain(item: Scenario) -> None:
    assert find_cluster_local(to_multidoc(rendered(item.name))) == []


def test_the_cluster_domain_check_runs_on_a_custom_domain() -> None:
    assert "custom-cluster-domain" in {item.name for item in CUSTOM_DOMAIN}
    assert scenario("custom-cluster-domain").values()["global"]["discovery"]["clusterDomain"] == "corp.local"


@pytest.mark.parametrize("name", PLATFORM_SCENARIOS)
def test_the_platform_globals_render_the_objects_their_modules_serve(name: str) -> None:
    """By capability or by the module's own name: nothing waits for a -crd shim DMT calls temporary."""
    chart = rendered(name)
    kinds = {obj["kind"] for obj in chart.objects}
    assert {"SecurityPolicyException", "VerticalPodAutoscaler", "PrometheusRule", "ServiceMonitor"} <= kinds
    assert "GrafanaDashboardDefinition" in kinds
    (exception,) = chart.of_kind("SecurityPolicyException")
    (daemon_set,) = chart.of_kind("DaemonSet")
    labels = daemon_set["spec"]["template"]["metadata"]["labels"]
    assert labels.get("security.deckhouse.io/security-policy-exception") == exception["metadata"]["name"]
    assert review(chart.objects, ClusterExpectations.from_values(scenario(name).values())) == []
