"""The cluster's egress proxy (global.clusterConfiguration.proxy) reaches the processes that call
outside the cluster, and its NO_PROXY keeps every in-cluster call off the proxy as each client
library of those processes reads it (templates/_proxy.tpl, D125)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache
from typing import Any

import botocore.utils  # type: ignore[import-untyped,unused-ignore]  # botocore has no type hints
import httpx2
import pytest
import yaml
from kubernetes.client import rest

from ai_models.names import (
    API_IN_CLUSTER_URL,
    MATERIALIZER_TEMPLATE_CONFIGMAP,
    MODULE_NAMESPACE,
    PUBLISHER_TEMPLATE_CONFIGMAP,
)
from support.egress import expected_proxy_env
from support.render import RenderedChart
from support.scenarios import Scenario, scenario

PROXY_NAMES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")
HUB = "https://huggingface.co/api/models"


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def variant(name: str, **changes: Any) -> Scenario:
    return dataclasses.replace(scenario(name), name=f"{name}-variant", **changes)


def _template(chart: RenderedChart, config_map: str) -> dict[str, Any]:
    data = chart.get("ConfigMap", config_map, MODULE_NAMESPACE)["data"]["template.yaml"]
    template: dict[str, Any] = yaml.safe_load(data)
    return template


def containers(chart: RenderedChart) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every container the chart runs, or has the controller run from a pod template."""
    for kind in ("Deployment", "DaemonSet"):
        for workload in chart.of_kind(kind):
            for container in workload["spec"]["template"]["spec"]["containers"]:
                yield f"{kind}/{workload['metadata']['name']}/{container['name']}", container
    for config_map in (PUBLISHER_TEMPLATE_CONFIGMAP, MATERIALIZER_TEMPLATE_CONFIGMAP):
        for container in _template(chart, config_map)["spec"]["containers"]:
            yield f"{config_map}/{container['name']}", container


def proxy_env(container: dict[str, Any]) -> dict[str, str]:
    return {
        entry["name"]: entry["value"]
        for entry in container.get("env") or []
        if entry["name"].upper() in {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}
    }


# The containers that call the Hub or the object store (every one with ai_models.process_env).
CALLS_OUT = (
    "Deployment/ai-models-controller/controller",
    "Deployment/ai-models-api/api",
    f"{PUBLISHER_TEMPLATE_CONFIGMAP}/publish",
)


def no_proxy_of(chart: RenderedChart) -> list[str]:
    env = proxy_env(dict(containers(chart))[CALLS_OUT[0]])
    return env["NO_PROXY"].split(",")


def test_every_container_that_calls_out_gets_the_cluster_proxy() -> None:
    chart = rendered("proxy")
    by_name = dict(containers(chart))
    for name in CALLS_OUT:
        env = proxy_env(by_name[name])
        assert sorted(env) == sorted(PROXY_NAMES), name
        assert env["HTTP_PROXY"] == env["http_proxy"] == "http://proxy.company.my:3128", name
        assert env["HTTPS_PROXY"] == env["https_proxy"] == "https://user:password@proxy.company.my:8443", name
        assert env == expected_proxy_env(scenario("proxy").values()), name


def test_containers_that_stay_in_the_cluster_get_no_proxy() -> None:
    # The materializer, the NodeCache plugin (and the sidecars) read only in-cluster Services; the
    # materializer runs in the workload's namespace, where NO_PROXY would name the object store.
    chart = variant("proxy", settings={"delivery": {"mode": "NodeCache"}}).render()
    stays_in = {name: proxy_env(container) for name, container in containers(chart) if name not in CALLS_OUT}
    assert f"{MATERIALIZER_TEMPLATE_CONFIGMAP}/materialize" in stays_in
    assert "DaemonSet/ai-models-node-cache/node-cache" in stays_in
    assert {name: env for name, env in stays_in.items() if env} == {}


def test_no_proxy_lists_the_cluster_the_store_and_the_admin_entries() -> None:
    entries = no_proxy_of(rendered("proxy"))
    assert entries[:5] == ["127.0.0.1", "localhost", "::1", "cluster.local", ".svc"]
    for entry in ("10.111.0.0/16", "10.222.0.0/16", "10.111.0.15", "company.my", "192.168.0.0/16"):
        assert entry in entries
    assert len(entries) == len(set(entries))


def test_nothing_is_rendered_without_a_proxy_url() -> None:
    # A proxy section with only noProxy (or nothing) sends nothing anywhere: no variable at all.
    only_no_proxy = variant(
        "proxy",
        global_overrides={"clusterConfiguration": {"proxy": {"noProxy": ["company.my"]}}},
    ).render()
    for chart in (rendered("minimal"), only_no_proxy):
        assert [name for name, container in containers(chart) if proxy_env(container)] == []


def test_an_https_only_proxy_a_custom_domain_and_an_ipv6_store() -> None:
    item = variant(
        "proxy",
        settings={"artifacts": {"endpoint": "https://[fd00:5::15]:9000"}},
        global_overrides={
            "discovery": {"clusterDomain": "corp.local"},
            "clusterConfiguration": {
                "clusterDomain": "corp.local",
                "proxy": {"httpProxy": None, "httpsProxy": "http://proxy.company.my:3128", "noProxy": None},
            },
        },
    )
    chart, chart_values = item.render(), item.values()
    env = proxy_env(dict(containers(chart))[CALLS_OUT[0]])
    assert sorted(env) == ["HTTPS_PROXY", "NO_PROXY", "https_proxy", "no_proxy"]
    assert env == expected_proxy_env(chart_values)
    entries = env["NO_PROXY"].split(",")
    assert "corp.local" in entries
    assert "cluster.local" not in entries
    assert "fd00:5::15" in entries


# What each client library of the module decides with the rendered settings in its environment:
# httpx2 (the Hub client), botocore (the object store), kubernetes (the API server).
IN_CLUSTER = (
    API_IN_CLUSTER_URL,  # the module's own short in-cluster name
    f"{API_IN_CLUSTER_URL}.cluster.local",
    "https://10.222.0.1:443",  # KUBERNETES_SERVICE_HOST, in the service CIDR
    "http://localhost:8080",
)
STORE = "http://10.111.0.15:9000/ai-models/key"


@pytest.fixture
def proxy_environment(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = proxy_env(dict(containers(rendered("proxy")))[CALLS_OUT[0]])
    for name in (*PROXY_NAMES, "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def httpx_proxied(url: str) -> bool:
    client = httpx2.Client()  # reads the environment, as the Hub client's shared client does
    try:
        # The transport httpx picks for the URL: its default one means no proxy.
        return client._transport_for_url(httpx2.URL(url)) is not client._transport
    finally:
        client.close()


@pytest.mark.usefixtures("proxy_environment")
def test_the_hub_client_library_proxies_the_hub_and_nothing_in_the_cluster() -> None:
    assert httpx_proxied(HUB)
    assert [url for url in (*IN_CLUSTER, STORE, "http://10.111.7.7:8080") if httpx_proxied(url)] == []


@pytest.mark.usefixtures("proxy_environment")
def test_the_object_store_client_library_keeps_the_store_off_the_proxy() -> None:
    # botocore matches NO_PROXY by host name only (no CIDRs): the store's host is listed itself.
    assert not botocore.utils.should_bypass_proxies("https://s3.amazonaws.com/bucket")
    assert botocore.utils.should_bypass_proxies(STORE)
    assert botocore.utils.should_bypass_proxies(API_IN_CLUSTER_URL)


def test_the_kubernetes_client_library_keeps_the_api_server_off_the_proxy(
    proxy_environment: dict[str, str],
) -> None:
    rules = proxy_environment["NO_PROXY"]
    assert not rest.should_bypass_proxies(HUB, rules)
    assert [url for url in IN_CLUSTER if not rest.should_bypass_proxies(url, rules)] == []
