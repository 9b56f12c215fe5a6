"""A broken setting fails with a message that names it: the schema (like addon-operator) for what
it can express, templates/validation.yaml for dependencies between settings."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from support.render import render_chart
from support.values import MINIMAL_SETTINGS, InvalidModuleValues, deep_merge, module_values


def settings(**changes: Any) -> dict[str, Any]:
    return deep_merge(MINIMAL_SETTINGS, changes)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (settings(delivery={"mode": "Torrent"}), r"aiModels\.delivery\.mode: 'Torrent' is not one of"),
        (
            settings(artifacts={"capacityLimit": "lots"}),
            r"aiModels\.artifacts\.capacityLimit: 'lots' does not match",
        ),
        (settings(https={"mode": "Always"}), r"aiModels\.https\.mode: 'Always' is not one of"),
        (settings(nodeSelector={"a": 1}), r"aiModels\.nodeSelector\.a: 1 is not of type 'string'"),
        (
            settings(unknownSetting=True),
            r"aiModels: Additional properties are not allowed \('unknownSetting'",
        ),
    ],
    ids=["delivery-mode", "capacity-limit", "https-mode", "node-selector", "unknown-setting"],
)
def test_schema_rejects_a_broken_setting_naming_it(broken: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidModuleValues, match=message):
        module_values(broken)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            settings(https={"certManager": {"clusterIssuerName": "x"}}),
            r"aiModels\.https\.mode is required when aiModels\.https is set",
        ),
        (
            settings(https={"mode": "CustomCertificate"}),
            r"aiModels\.https\.customCertificate\.secretName is required "
            r"when aiModels\.https\.mode is CustomCertificate",
        ),
        (
            settings(artifacts={"capacityLimit": "0Gi"}),
            r"aiModels\.artifacts\.capacityLimit must be greater than zero",
        ),
        (
            settings(delivery={"mode": "NodeCache", "nodeCache": {"nodeSelector": {}}}),
            r"aiModels\.delivery\.nodeCache\.nodeSelector must select the cache nodes",
        ),
        (
            settings(delivery={"mode": "NodeCache", "nodeCache": {"size": "0"}}),
            r"aiModels\.delivery\.nodeCache\.size must be greater than zero",
        ),
        (
            settings(delivery={"provisioningTimeout": "0h00m0s"}),
            r"aiModels\.delivery\.provisioningTimeout must be longer than zero",
        ),
    ],
    ids=[
        "https-without-mode",
        "custom-certificate-without-secret",
        "zero-budget",
        "empty-cache-selector",
        "zero-cache",
        "zero-provisioning-timeout",
    ],
)
def test_templates_reject_inconsistent_settings_naming_them(broken: dict[str, Any], message: str) -> None:
    values = module_values(broken)
    with pytest.raises(helm_python.HelmRenderError, match=message):
        render_chart(values)


def test_consistent_settings_around_those_rules_render() -> None:
    for valid in (
        settings(artifacts={"capacityLimit": "0.5Gi"}),
        settings(delivery={"mode": "SharedPVC", "nodeCache": {"nodeSelector": {}}}),
        settings(delivery={"provisioningTimeout": "0h0m1s"}),
        settings(https={"mode": "CustomCertificate", "customCertificate": {"secretName": "tls"}}),
    ):
        assert render_chart(module_values(valid)).objects


# ----- CertManager mode without the cert-manager module --------------------------------------------

WITHOUT_CERT_MANAGER = {
    "enabledModules": ["ai-models", "operator-prometheus-crd", "vertical-pod-autoscaler-crd"]
}
CERT_MANAGER_FIX = (
    r"enable the cert-manager module, "
    r"or set aiModels\.https\.mode to CustomCertificate, OnlyInURI or Disabled"
)


@pytest.mark.parametrize(
    ("module_settings", "global_overrides", "source"),
    [
        ({}, {}, r"global\.modules\.https\.mode"),
        (
            {"https": {"mode": "CertManager", "certManager": {"clusterIssuerName": "selfsigned"}}},
            {"modules": {"https": {"mode": "Disabled"}}},
            r"aiModels\.https\.mode",
        ),
    ],
    ids=["global-mode", "module-mode"],
)
def test_cert_manager_mode_without_the_cert_manager_module_fails_naming_the_cause_and_the_fix(
    module_settings: dict[str, Any], global_overrides: dict[str, Any], source: str
) -> None:
    values = module_values(
        settings(**module_settings), global_overrides=deep_merge(global_overrides, WITHOUT_CERT_MANAGER)
    )
    message = rf"HTTPS mode is CertManager \({source}\) but the cert-manager module is not enabled"
    message += rf".*: {CERT_MANAGER_FIX}$"
    with pytest.raises(helm_python.HelmRenderError, match=message):
        render_chart(values)


def test_without_the_cert_manager_module_other_modes_and_an_unpublished_module_render() -> None:
    """The check applies only when the routes render and the effective mode is CertManager."""
    for module_settings, global_overrides in (
        # No public domain: nothing is published, so nothing needs a certificate.
        ({}, {"modules": {"publicDomainTemplate": None}}),
        # The module's own mode wins over the global CertManager.
        ({"https": {"mode": "OnlyInURI"}}, {}),
        ({"https": {"mode": "CustomCertificate", "customCertificate": {"secretName": "tls"}}}, {}),
    ):
        values = module_values(
            settings(**module_settings), global_overrides=deep_merge(global_overrides, WITHOUT_CERT_MANAGER)
        )
        chart = render_chart(values)
        assert chart.objects
        assert chart.of_kind("Certificate") == []
        published = bool(values["global"]["modules"].get("publicDomainTemplate"))
        assert bool(chart.of_kind("Ingress")) == published
