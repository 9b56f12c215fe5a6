"""The proxy environment a module process that calls outside the cluster should get, worked out from
the Helm values on its own (the oracle of templates/_proxy.tpl, D125).

    expected_proxy_env(scenario("proxy").values())
    # {"HTTP_PROXY": ..., "http_proxy": ..., "HTTPS_PROXY": ..., ..., "NO_PROXY": "127.0.0.1,...", ...}
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

# Always off the proxy: loopback and the module's in-cluster short names (`*.svc`).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def expected_no_proxy(values: Mapping[str, Any]) -> list[str]:
    global_values = values["global"]
    cluster = global_values.get("clusterConfiguration") or {}
    domain = (global_values.get("discovery") or {}).get("clusterDomain") or cluster.get("clusterDomain")
    entries: list[str] = [*LOOPBACK, str(domain), ".svc"]
    entries += [cidr for cidr in (cluster.get("podSubnetCIDR"), cluster.get("serviceSubnetCIDR")) if cidr]
    store_host = urllib.parse.urlsplit(values["aiModels"]["artifacts"]["endpoint"]).hostname
    if store_host:
        entries.append(store_host)
    entries += (cluster.get("proxy") or {}).get("noProxy") or []
    return list(dict.fromkeys(entries))


def expected_proxy_env(values: Mapping[str, Any]) -> dict[str, str]:
    """Nothing without an httpProxy or httpsProxy; each variable in both spellings otherwise."""
    proxy = (values["global"].get("clusterConfiguration") or {}).get("proxy") or {}
    if not (proxy.get("httpProxy") or proxy.get("httpsProxy")):
        return {}
    env: dict[str, str] = {}
    for variable, key in (("HTTP_PROXY", "httpProxy"), ("HTTPS_PROXY", "httpsProxy")):
        if proxy.get(key):
            env[variable] = env[variable.lower()] = proxy[key]
    env["NO_PROXY"] = env["no_proxy"] = ",".join(expected_no_proxy(values))
    return env
