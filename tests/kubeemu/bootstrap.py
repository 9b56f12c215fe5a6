"""Objects every cluster has from the start: the initial namespaces and the apiserver's bootstrap
RBAC policy that matters to clients (cluster-admin, discovery, self-reviews, auth delegation)."""

from __future__ import annotations

from typing import Any

from kubeemu.builtin_resources import INITIAL_NAMESPACES

_RBAC = "rbac.authorization.k8s.io/v1"
_AUTHENTICATED = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": _RBAC,
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS)},
        "rules": rules,
    }


def _binding(name: str, role: str, subject: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": _RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


def bootstrap_objects() -> list[dict[str, Any]]:
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in INITIAL_NAMESPACES
    ]
    discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ]
    rbac = [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _binding(
            "cluster-admin",
            "cluster-admin",
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"},
        ),
        _cluster_role("system:discovery", [{"nonResourceURLs": discovery_urls, "verbs": ["get"]}]),
        _binding("system:discovery", "system:discovery", _AUTHENTICATED),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                },
            ],
        ),
        _binding("system:public-info-viewer", "system:public-info-viewer", _AUTHENTICATED),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _binding("system:basic-user", "system:basic-user", _AUTHENTICATED),
        _cluster_role(
            "system:auth-delegator",
            [
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["subjectaccessreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
    ]
    return namespaces + rbac
