"""The module namespace, its kube-rbac-proxy CA and the module registry pull secret."""

from __future__ import annotations

import base64
import json

from support.render import render_chart
from support.scenarios import DEFAULT_REGISTRY, scenario


def test_namespace_is_restricted_and_watched_by_monitoring() -> None:
    namespace = scenario("minimal").render().get("Namespace", "d8-ai-models")
    assert namespace["metadata"]["labels"] == {
        "heritage": "deckhouse",
        "module": "ai-models",
        "security.deckhouse.io/pod-policy": "restricted",
        "prometheus.deckhouse.io/rules-watcher-enabled": "true",
        "prometheus.deckhouse.io/monitor-watcher-enabled": "true",
        "extended-monitoring.deckhouse.io/enabled": "",
    }


def test_kube_rbac_proxy_ca_is_published_in_the_module_namespace() -> None:
    rendered = scenario("kube-rbac-proxy-ca").render()
    config_map = rendered.get("ConfigMap", "kube-rbac-proxy-ca.crt", "d8-ai-models")
    expected = scenario("kube-rbac-proxy-ca").global_overrides["internal"]["modules"]["kubeRBACProxyCA"][
        "cert"
    ]
    assert config_map["data"] == {"ca.crt": expected}
    assert config_map["metadata"]["labels"] == {"heritage": "deckhouse", "module": "ai-models"}


def test_kube_rbac_proxy_ca_is_absent_until_deckhouse_publishes_it() -> None:
    names = [item["metadata"]["name"] for item in scenario("minimal").render().of_kind("ConfigMap")]
    assert "kube-rbac-proxy-ca.crt" not in names


def test_registry_secret_carries_the_injected_docker_config() -> None:
    secret = scenario("minimal").render().get("Secret", "ai-models-module-registry", "d8-ai-models")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    assert secret["data"] == {".dockerconfigjson": DEFAULT_REGISTRY["dockercfg"]}
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert "registry.example.com" in config["auths"]


def test_registry_secret_is_absent_without_credentials() -> None:
    values = scenario("minimal").values()
    values["aiModels"]["registry"] = {}
    assert render_chart(values).of_kind("Secret") == []
