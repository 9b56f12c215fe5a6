"""The module namespace, its kube-rbac-proxy CA and the module registry pull secret."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from support.render import RenderedChart, render_chart
from support.scenarios import DEFAULT_REGISTRY, REGISTRY_HOST, scenario


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
    """As lib-helm's helm_lib_kube_rbac_proxy_ca_certificate renders it: the CA, its description
    annotation and the module labels."""
    rendered = scenario("kube-rbac-proxy-ca").render()
    config_map = rendered.get("ConfigMap", "kube-rbac-proxy-ca.crt", "d8-ai-models")
    expected = scenario("kube-rbac-proxy-ca").global_overrides["internal"]["modules"]["kubeRBACProxyCA"][
        "cert"
    ]
    assert config_map["data"] == {"ca.crt": expected}
    assert config_map["metadata"]["labels"] == {"heritage": "deckhouse", "module": "ai-models"}
    description = "Contains a CA bundle that can be used to verify the kube-rbac-proxy clients.\n"
    assert config_map["metadata"]["annotations"] == {"kubernetes.io/description": description}


def test_kube_rbac_proxy_ca_config_map_always_renders() -> None:
    """lib-helm renders it unconditionally (Deckhouse always publishes the CA), and DMT's
    kube-rbac-proxy rule wants it in every d8- namespace, also where DMT's stub CA is empty."""
    config_map = scenario("minimal").render().get("ConfigMap", "kube-rbac-proxy-ca.crt", "d8-ai-models")
    assert config_map["data"] == {"ca.crt": ""}


def test_registry_secret_carries_the_injected_docker_config() -> None:
    secret = scenario("minimal").render().get("Secret", "ai-models-module-registry", "d8-ai-models")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    assert secret["data"] == {".dockerconfigjson": DEFAULT_REGISTRY["dockercfg"]}
    config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
    assert "registry.example.com" in config["auths"]


def _docker_config(rendered: RenderedChart) -> dict[str, Any]:
    secret = rendered.get("Secret", "ai-models-module-registry", "d8-ai-models")
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    assert set(secret["data"]) == {".dockerconfigjson"}
    config: dict[str, Any] = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"], validate=True))
    return config


def test_registry_secret_is_anonymous_for_the_module_registry_without_credentials() -> None:
    # What Deckhouse itself generates for an anonymous ModuleSource (deckhouse/deckhouse#10210).
    assert _docker_config(scenario("registry-anonymous").render()) == {"auths": {REGISTRY_HOST: {}}}


def test_registry_secret_keeps_the_port_of_the_registry_host() -> None:
    values = scenario("registry-anonymous").values()
    values["aiModels"]["registry"]["base"] = "https://registry.local:5000/modules"
    assert _docker_config(render_chart(values)) == {"auths": {"registry.local:5000": {}}}


def test_registry_secret_carries_the_global_credentials_when_images_come_from_the_global_registry() -> None:
    case = scenario("registry-global-credentials")
    expected = case.global_overrides["modulesImages"]["registry"]["dockercfg"]
    secret = case.render().get("Secret", "ai-models-module-registry", "d8-ai-models")
    assert secret["data"] == {".dockerconfigjson": expected}


@pytest.mark.parametrize("name", ["minimal", "registry-anonymous", "registry-global-credentials"])
def test_every_pull_secret_reference_names_the_rendered_secret(name: str) -> None:
    rendered = scenario(name).render()
    secrets = {item["metadata"]["name"] for item in rendered.of_kind("Secret")}
    for kind in ("Deployment", "DaemonSet"):
        for workload in rendered.of_kind(kind):
            for reference in workload["spec"]["template"]["spec"].get("imagePullSecrets", []):
                assert reference["name"] in secrets, f"{kind} {workload['metadata']['name']}"
    controller = rendered.get("Deployment", "ai-models-controller", "d8-ai-models")
    container = controller["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["AI_MODELS_DELIVERY_REGISTRY_SECRET"] == "ai-models-module-registry"
