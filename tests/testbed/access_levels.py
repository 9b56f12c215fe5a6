"""Deckhouse access levels (user-authz) mapped onto RBAC bindings in the emulator: what Deckhouse's
user-authz module would bind for a subject given a level.

Levels are cumulative as in Deckhouse: PrivilegedUser ⊃ User, Editor ⊃ PrivilegedUser,
Admin ⊃ Editor, ClusterEditor ⊃ Editor (but not Admin), ClusterAdmin ⊃ ClusterEditor and Admin.
Granting a level binds the module's `d8:user-authz:ai-models:<level>` ClusterRole of every level it
includes: cluster-wide with ClusterRoleBindings, or limited to one namespace with RoleBindings (so
cluster-scoped kinds stay out of reach, as with a namespace-limited rule in Deckhouse).

ClusterAdmin also gets `kubeemu:deckhouse-cluster-admin`, a stand-in for what Deckhouse's own
ClusterAdmin level grants outside this module (namespaces, workloads, configmaps, secrets, events,
leases, read access to RBAC, CRDs, nodes and storage classes), so a dev admin can work with kubectl.
It is deliberately narrower than `cluster-admin`: no RBAC writes, no CRD writes.
"""

from __future__ import annotations

from typing import Any

from ai_models import names
from kubeemu.authn import Identity
from kubeemu.cluster import Cluster

MODULE = names.MODULE
ACCESS_LEVELS = ("User", "PrivilegedUser", "Editor", "Admin", "ClusterEditor", "ClusterAdmin")
_INCLUDES = {
    "User": ("User",),
    "PrivilegedUser": ("User", "PrivilegedUser"),
    "Editor": ("User", "PrivilegedUser", "Editor"),
    "Admin": ("User", "PrivilegedUser", "Editor", "Admin"),
    "ClusterEditor": ("User", "PrivilegedUser", "Editor", "ClusterEditor"),
    "ClusterAdmin": ACCESS_LEVELS,
}
CLUSTER_ADMIN_STAND_IN = "kubeemu:deckhouse-cluster-admin"
_ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_READ = ["get", "list", "watch"]


def kebab(level: str) -> str:
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in level).lstrip("-")


def module_role_name(level: str, *, module: str = MODULE) -> str:
    """`d8:user-authz:ai-models:cluster-editor` for ClusterEditor."""
    if level not in ACCESS_LEVELS:
        raise ValueError(f"unknown access level {level!r}; one of {', '.join(ACCESS_LEVELS)}")
    return f"d8:user-authz:{module}:{kebab(level)}"


def included_levels(level: str) -> tuple[str, ...]:
    if level not in _INCLUDES:
        raise ValueError(f"unknown access level {level!r}; one of {', '.join(ACCESS_LEVELS)}")
    return _INCLUDES[level]


def cluster_admin_stand_in() -> dict[str, Any]:
    rules = [
        {
            "apiGroups": [""],
            "resources": [
                "namespaces",
                "configmaps",
                "secrets",
                "serviceaccounts",
                "services",
                "endpoints",
                "pods",
                "pods/log",
                "events",
                "persistentvolumeclaims",
                "resourcequotas",
                "limitranges",
            ],
            "verbs": _ALL,
        },
        {"apiGroups": [""], "resources": ["nodes", "persistentvolumes"], "verbs": _READ},
        {"apiGroups": ["apps", "batch", "policy", "networking.k8s.io"], "resources": ["*"], "verbs": _ALL},
        {"apiGroups": ["events.k8s.io", "coordination.k8s.io"], "resources": ["*"], "verbs": _ALL},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["*"], "verbs": _READ},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": _READ},
        {"apiGroups": ["storage.k8s.io"], "resources": ["*"], "verbs": _READ},
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews", "localsubjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ADMIN_STAND_IN, "labels": {"app.kubernetes.io/managed-by": "kubeemu"}},
        "rules": rules,
    }


def _subject(identity: Identity) -> dict[str, str]:
    account = identity.service_account_ref
    if account is not None:
        return {"kind": "ServiceAccount", "name": account[1], "namespace": account[0]}
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity.name}


def grant_access_level(
    cluster: Cluster, identity: Identity, level: str, *, namespace: str | None = None, module: str = MODULE
) -> list[dict[str, Any]]:
    """Bind `identity` to the module roles of `level` (and below); returns the bindings created."""
    roles = [module_role_name(included, module=module) for included in included_levels(level)]
    if level == "ClusterAdmin":
        cluster.apply(cluster_admin_stand_in())
        roles.append(CLUSTER_ADMIN_STAND_IN)
    bindings = []
    for role in roles:
        binding: dict[str, Any] = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
            "metadata": {
                "name": f"kubeemu:{kebab(level)}:{identity.name}:{role}",
                "labels": {"app.kubernetes.io/managed-by": "kubeemu"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [_subject(identity)],
        }
        if namespace:
            binding["metadata"]["namespace"] = namespace
        bindings.append(cluster.apply(binding))
    return bindings
