"""Discovery documents: /version, legacy /api and /apis(/<group>(/<version>)), and aggregated
discovery (apidiscovery.k8s.io/v2), which kubectl 1.36 asks for first."""

from __future__ import annotations

import hashlib
from typing import Any

from kubeemu.resources import SUBRESOURCE_VERBS, Registry, ResourceType

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.2",
    "gitCommit": "kubeemu",
    "gitTreeState": "clean",
    "buildDate": "2025-11-11T00:00:00Z",
    "goVersion": "go1.24.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}
AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str | None) -> bool:
    return any(
        "as=APIGroupDiscoveryList" in clause and "v=v2" in clause and "v=v2beta1" not in clause
        for clause in (accept or "").split(",")
    )


def _cidrs(server_address: str) -> list[dict[str, str]]:
    return [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": _cidrs(server_address)}


def _group_doc(group: str, versions: list[str], server_address: str) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
        "serverAddressByClientCIDRs": _cidrs(server_address),
    }


def api_group_list(registry: Registry, server_address: str) -> dict[str, Any]:
    groups = [_group_doc(g, vs, server_address) for g, vs in registry.groups() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str, server_address: str) -> dict[str, Any] | None:
    for name, versions in registry.groups():
        if name == group and group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(name, versions, server_address)}
    return None


def _storage_hash(rtype: ResourceType) -> str:
    return hashlib.sha256(rtype.storage_key.encode()).hexdigest()[:12]


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = sorted(registry.in_group_version(group, version), key=lambda rt: rt.plural)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular_name,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        if not rt.virtual:
            entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        for sub in sorted(rt.subresources):
            sub_kind = "TokenRequest" if sub == "token" else rt.kind
            sub_entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": sub_kind,
                "verbs": list(SUBRESOURCE_VERBS.get(sub, ("get",))),
            }
            if sub == "token":
                sub_entry["group"], sub_entry["version"] = "authentication.k8s.io", "v1"
            resources.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def aggregated(registry: Registry, *, legacy: bool) -> dict[str, Any]:
    """APIGroupDiscoveryList for /api (legacy=True, the core group only) or /apis."""
    items: list[dict[str, Any]] = []
    for group, versions in registry.groups():
        if bool(group) == legacy:
            continue
        version_docs = []
        for version in versions:
            resources = []
            for rt in sorted(registry.in_group_version(group, version), key=lambda r: r.plural):
                entry: dict[str, Any] = {
                    "resource": rt.plural,
                    "responseKind": {"group": group, "version": version, "kind": rt.kind},
                    "scope": "Namespaced" if rt.namespaced else "Cluster",
                    "singularResource": rt.singular_name,
                    "verbs": list(rt.verbs),
                }
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                subs = []
                for sub in sorted(rt.subresources):
                    response = (
                        {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}
                        if sub == "token"
                        else {"group": group, "version": version, "kind": rt.kind}
                    )
                    subs.append(
                        {
                            "subresource": sub,
                            "responseKind": response,
                            "verbs": list(SUBRESOURCE_VERBS.get(sub, ("get",))),
                        }
                    )
                if subs:
                    entry["subresources"] = subs
                resources.append(entry)
            version_docs.append({"version": version, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": version_docs})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
