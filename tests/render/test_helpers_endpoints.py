"""Cluster-domain, public-endpoint, HTTPS and Gateway API helpers."""

from __future__ import annotations

import base64
from typing import Any

import helm_python
import pytest

from support.probe import ProbeChart
from support.values import MINIMAL_SETTINGS, deep_merge, module_values

GATEWAY_API = (
    "gateway.networking.k8s.io/v1",
    "gateway.networking.k8s.io/v1/ListenerSet",
    "gateway.networking.k8s.io/v1/HTTPRoute",
)
CERT = {
    "tls.crt": base64.b64encode(b"crt").decode(),
    "tls.key": base64.b64encode(b"key").decode(),
    "ca.crt": base64.b64encode(b"ca").decode(),
}


def settings(**extra: Any) -> dict[str, Any]:
    return {**MINIMAL_SETTINGS, **extra}


def drop_global(*path: str) -> dict[str, Any]:
    """Values without one global key (module_values' deep merge deletes a key set to None)."""
    override: dict[str, Any] = {path[-1]: None}
    for key in reversed(path[:-1]):
        override = {key: override}
    return module_values(global_overrides=override)


# ----- cluster domain and in-cluster names -------------------------------------------------------


def test_cluster_domain_comes_from_discovery(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"discovery": {"clusterDomain": "corp.local"}})
    assert probe_chart.evaluate('{{ include "ai_models.cluster_domain" . }}', values) == "corp.local"
    assert (
        probe_chart.evaluate('{{ include "ai_models.service_fqdn" (list . "ai-models-api") }}', values)
        == "ai-models-api.d8-ai-models.svc.corp.local"
    )


def test_cluster_domain_falls_back_to_the_cluster_configuration(probe_chart: ProbeChart) -> None:
    values = deep_merge(
        drop_global("discovery", "clusterDomain"),
        {"global": {"clusterConfiguration": {"clusterDomain": "k8s.corp"}}},
    )
    assert probe_chart.evaluate('{{ include "ai_models.cluster_domain" . }}', values) == "k8s.corp"


def test_unknown_cluster_domain_fails_instead_of_guessing(probe_chart: ProbeChart) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=r"global\.discovery\.clusterDomain is not set"):
        probe_chart.evaluate(
            '{{ include "ai_models.cluster_domain" . }}', drop_global("discovery", "clusterDomain")
        )


# ----- public domain and ingress class -----------------------------------------------------------


def test_public_domain_fills_the_template(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modules": {"publicDomainTemplate": "%s.apps.corp.example"}})
    assert (
        probe_chart.evaluate('{{ include "ai_models.public_domain" (list . "ai-models") }}', values)
        == "ai-models.apps.corp.example"
    )


def test_public_domain_fails_without_the_template(probe_chart: ProbeChart) -> None:
    with pytest.raises(
        helm_python.HelmRenderError, match=r"global\.modules\.publicDomainTemplate is not set"
    ):
        probe_chart.evaluate(
            '{{ include "ai_models.public_domain" (list . "ai-models") }}',
            drop_global("modules", "publicDomainTemplate"),
        )


def test_public_domain_fails_on_a_template_without_placeholder(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modules": {"publicDomainTemplate": "apps.example.com"}})
    with pytest.raises(helm_python.HelmRenderError, match=r'must contain "%s"'):
        probe_chart.evaluate('{{ include "ai_models.public_domain" (list . "ai-models") }}', values)


def test_public_domain_longer_than_a_certificate_allows_fails(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modules": {"publicDomainTemplate": "%s." + "x" * 60 + ".com"}})
    with pytest.raises(helm_python.HelmRenderError, match="longer than 64 characters"):
        probe_chart.evaluate('{{ include "ai_models.public_domain" (list . "ai-models") }}', values)


def test_ingress_class_prefers_the_module_setting(probe_chart: ProbeChart) -> None:
    assert probe_chart.evaluate('{{ include "ai_models.ingress_class" . }}') == "nginx"
    values = module_values(settings(ingressClass="internal"))
    assert probe_chart.evaluate('{{ include "ai_models.ingress_class" . }}', values) == "internal"
    with pytest.raises(
        helm_python.HelmRenderError, match=r"aiModels\.ingressClass or global\.modules\.ingressClass"
    ):
        probe_chart.evaluate(
            '{{ include "ai_models.ingress_class" . }}', drop_global("modules", "ingressClass")
        )


# ----- HTTPS -------------------------------------------------------------------------------------

HTTPS_SUMMARY = (
    '{{ include "ai_models.https_mode" . }}|{{ include "ai_models.https_uri_scheme" . }}|'
    '{{ include "ai_models.https_ingress_tls_enabled" . }}|'
    '{{ include "ai_models.https_route_tls_enabled" . }}'
)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("Disabled", "Disabled|http||"),
        ("OnlyInURI", "OnlyInURI|https||"),
        ("CertManager", "CertManager|https|true|true"),
        ("CustomCertificate", "CustomCertificate|https|true|true"),
    ],
)
def test_https_mode_drives_scheme_and_tls(probe_chart: ProbeChart, mode: str, expected: str) -> None:
    https: dict[str, Any] = {"mode": mode}
    if mode == "CustomCertificate":
        https["customCertificate"] = {"secretName": "tls"}
    assert probe_chart.evaluate(HTTPS_SUMMARY, module_values(settings(https=https))) == expected


def test_global_https_mode_applies_when_the_module_sets_none(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modules": {"https": {"mode": "OnlyInURI"}}})
    assert probe_chart.evaluate(HTTPS_SUMMARY, values) == "OnlyInURI|https||"


def test_module_https_mode_wins_over_the_global_one(probe_chart: ProbeChart) -> None:
    values = module_values(
        settings(https={"mode": "Disabled"}), global_overrides={"modules": {"https": {"mode": "CertManager"}}}
    )
    assert probe_chart.evaluate(HTTPS_SUMMARY, values) == "Disabled|http||"


def test_cert_manager_mode_fails_when_cert_manager_is_not_enabled(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"enabledModules": ["ai-models"]})
    with pytest.raises(helm_python.HelmRenderError, match="cert-manager module is not enabled"):
        probe_chart.evaluate('{{ include "ai_models.https_mode" . }}', values)


def test_unknown_global_https_mode_fails_naming_both_settings(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"modules": {"https": {"mode": "Sometimes"}}})
    with pytest.raises(
        helm_python.HelmRenderError, match=r"aiModels\.https\.mode or global\.modules\.https\.mode"
    ):
        probe_chart.evaluate('{{ include "ai_models.https_mode" . }}', values)


def test_secret_names_per_mode(probe_chart: ProbeChart) -> None:
    template = (
        '{{ include "ai_models.https_secret_name" (list . "ai-models-ingress-tls") }}|'
        '{{ include "ai_models.https_secret_name"'
        ' (list . "ai-models-ingress-tls" "ai-models-httproute-tls") }}'
    )
    cert_manager = module_values(settings(https={"mode": "CertManager"}))
    assert probe_chart.evaluate(template, cert_manager) == "ai-models-ingress-tls|ai-models-httproute-tls"
    custom = module_values(
        settings(https={"mode": "CustomCertificate", "customCertificate": {"secretName": "x"}})
    )
    assert (
        probe_chart.evaluate(template, custom)
        == "ai-models-ingress-tls-customcertificate|ai-models-ingress-tls-customcertificate"
    )


@pytest.mark.parametrize("mode", ["Disabled", "OnlyInURI"])
def test_secret_name_fails_in_modes_without_tls(probe_chart: ProbeChart, mode: str) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=f"HTTPS mode {mode} has no TLS secret"):
        probe_chart.evaluate(
            '{{ include "ai_models.https_secret_name" (list . "x") }}',
            module_values(settings(https={"mode": mode})),
        )


def test_cluster_issuer_comes_from_the_module_then_the_global_setting(probe_chart: ProbeChart) -> None:
    template = '{{ include "ai_models.https_cert_manager_cluster_issuer_name" . }}'
    assert probe_chart.evaluate(template) == "letsencrypt"
    module = module_values(
        settings(https={"mode": "CertManager", "certManager": {"clusterIssuerName": "corp-ca"}})
    )
    assert probe_chart.evaluate(template, module) == "corp-ca"
    only_mode = module_values(
        settings(https={"mode": "CertManager"}),
        global_overrides={"modules": {"https": {"certManager": {"clusterIssuerName": "global-ca"}}}},
    )
    assert probe_chart.evaluate(template, only_mode) == "global-ca"


def test_cluster_issuer_fails_when_nothing_names_one(probe_chart: ProbeChart) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=r"aiModels\.https\.certManager\.clusterIssuerName"):
        probe_chart.evaluate(
            '{{ include "ai_models.https_cert_manager_cluster_issuer_name" . }}',
            drop_global("modules", "https", "certManager"),
        )


def test_custom_certificate_is_copied_into_the_module_namespace(probe_chart: ProbeChart) -> None:
    values = module_values(
        settings(https={"mode": "CustomCertificate", "customCertificate": {"secretName": "corp-tls"}}),
        internal={"customCertificateData": CERT},
    )
    secret = probe_chart.evaluate_yaml(
        '{{ include "ai_models.https_copy_custom_certificate" (list . "ai-models-ingress-tls") }}', values
    )
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "ai-models-ingress-tls-customcertificate",
            "namespace": "d8-ai-models",
            "labels": {"heritage": "deckhouse", "module": "ai-models"},
        },
        "type": "kubernetes.io/tls",
        "data": CERT,
    }


def test_custom_certificate_is_not_copied_in_other_modes_or_before_the_hook_ran(
    probe_chart: ProbeChart,
) -> None:
    template = '{{ include "ai_models.https_copy_custom_certificate" (list . "x") }}'
    assert probe_chart.evaluate(template, module_values(internal={"customCertificateData": CERT})) == ""
    no_data = module_values(
        settings(https={"mode": "CustomCertificate", "customCertificate": {"secretName": "x"}})
    )
    assert probe_chart.evaluate(template, no_data) == ""


# ----- Gateway API -------------------------------------------------------------------------------

GATEWAY_SUMMARY = (
    '{{ include "ai_models.gateway_name" . }}/{{ include "ai_models.gateway_namespace" . }}|'
    '{{ include "ai_models.gateway_api_available" . }}|{{ include "ai_models.gateway_enabled" . }}'
)
MODULE_GW = {"name": "module-gw", "namespace": "d8-module"}
GLOBAL_GW = {"name": "global-gw", "namespace": "d8-global"}
DISCOVERED_GW = {"name": "discovered-gw", "namespace": "d8-alb"}


def gateway_values(module: bool, global_: bool, discovered: bool, enabled: bool = True) -> dict[str, Any]:
    gateway_api: dict[str, Any] = {"enabled": enabled}
    if module:
        gateway_api["gateway"] = MODULE_GW
    overrides: dict[str, Any] = {}
    if global_:
        overrides["modules"] = {"gatewayAPI": {"gateway": GLOBAL_GW}}
    if discovered:
        overrides["discovery"] = {"gatewayAPIDefaultGateway": DISCOVERED_GW}
    return module_values(settings(gatewayAPI=gateway_api), global_overrides=overrides)


@pytest.mark.parametrize(
    ("module", "global_", "discovered", "expected"),
    [
        (True, True, True, "module-gw/d8-module"),
        (False, True, True, "global-gw/d8-global"),
        (False, False, True, "discovered-gw/d8-alb"),
        (False, False, False, "/"),
    ],
)
def test_gateway_resolves_module_then_global_then_discovered(
    probe_chart: ProbeChart, module: bool, global_: bool, discovered: bool, expected: str
) -> None:
    summary = probe_chart.evaluate(
        GATEWAY_SUMMARY, gateway_values(module, global_, discovered), api_versions=GATEWAY_API
    )
    assert summary.split("|")[0] == expected


def test_gateway_without_a_namespace_does_not_resolve(probe_chart: ProbeChart) -> None:
    values = module_values(global_overrides={"discovery": {"gatewayAPIDefaultGateway": {"name": "half"}}})
    assert probe_chart.evaluate(GATEWAY_SUMMARY, values, api_versions=GATEWAY_API) == "/|true|"


def test_gateway_is_enabled_only_when_resolved_switched_on_and_served(probe_chart: ProbeChart) -> None:
    resolved = gateway_values(False, False, True)
    assert (
        probe_chart.evaluate(GATEWAY_SUMMARY, resolved, api_versions=GATEWAY_API)
        == "discovered-gw/d8-alb|true|true"
    )
    assert probe_chart.evaluate(GATEWAY_SUMMARY, resolved) == "discovered-gw/d8-alb||"
    assert (
        probe_chart.evaluate(GATEWAY_SUMMARY, gateway_values(False, False, False), api_versions=GATEWAY_API)
        == "/|true|"
    )
    switched_off = gateway_values(False, False, True, enabled=False)
    assert (
        probe_chart.evaluate(GATEWAY_SUMMARY, switched_off, api_versions=GATEWAY_API)
        == "discovered-gw/d8-alb|true|"
    )


def test_gateway_api_needs_both_listenerset_and_httproute(probe_chart: ProbeChart) -> None:
    template = '{{ include "ai_models.gateway_api_available" . }}'
    assert probe_chart.evaluate(template, api_versions=GATEWAY_API[:2]) == ""
    assert probe_chart.evaluate(template, api_versions=("gateway.networking.k8s.io/v1",)) == ""
    assert probe_chart.evaluate(template, api_versions=GATEWAY_API) == "true"
