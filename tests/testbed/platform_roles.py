"""The experimental (rbacv2) roles Deckhouse's user-authz ships, as the emulator needs them to
aggregate the module's capabilities: the legacy use/manage roles of Deckhouse 1.75 to 1.77 and the
namespace/subsystem/system roles of 1.78.

Roles are ClusterRoles with an `aggregationRule` and no rules of their own; Kubernetes fills them
from the capabilities their selectors match. The platform chains its levels (a viewer role carries
the label that aggregates it into the next level up), and the clusterrole-aggregation controller
resolves such chains over time; the emulator aggregates one step only, so each role here selects
its own level and every level below it directly, which grants the same rules.

Selectors as in deckhouse `modules/140-user-authz/templates/rbacv2/**` and
`docs/internal/RBACV2_MODULE_MIGRATION.md`: on 1.78 a namespace role selects
`rbac.deckhouse.io/aggregate-to-namespace-as`, a subsystem role
`rbac.deckhouse.io/aggregate-to-<subsystem>-as` (whatever the object's kind, which is why a legacy
`use` object is granted cluster-wide there), a system role every subsystem's lineage; before 1.78
the use and manage roles also select on `rbac.deckhouse.io/kind`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LEGACY, CAPABILITY = "legacy", "capability"
NAMESPACE_LEVELS = ("viewer", "user", "manager", "admin", "superadmin")
LEGACY_USE_LEVELS = ("viewer", "user", "manager", "admin")
CLUSTER_LEVELS = ("viewer", "manager")
SUBSYSTEMS = (
    "deckhouse",
    "infrastructure",
    "kubernetes",
    "networking",
    "observability",
    "security",
    "storage",
)


@dataclass(frozen=True)
class PlatformRole:
    name: str
    lineage: str  # the aggregation lineage it collects: "namespace", a subsystem, or "system"
    level: str
    namespaced: bool  # granted with a RoleBinding (True) or a ClusterRoleBinding (False)


def _up_to(levels: tuple[str, ...], level: str) -> tuple[str, ...]:
    return levels[: levels.index(level) + 1]


def _role(name: str, selectors: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"heritage": "deckhouse", "module": "user-authz"}},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": labels} for labels in selectors]},
    }


def platform_roles(model: str) -> list[PlatformRole]:
    """The roles a subject is bound to, in the platform of `model` (LEGACY or CAPABILITY)."""
    if model == LEGACY:
        return [
            PlatformRole(f"d8:use:role:{level}", "kubernetes", level, True) for level in LEGACY_USE_LEVELS
        ] + [
            PlatformRole(f"d8:manage:{scope}:{level}", scope if scope != "all" else "system", level, False)
            for scope in (*SUBSYSTEMS, "all")
            for level in CLUSTER_LEVELS
        ]
    if model == CAPABILITY:
        return [
            PlatformRole(f"d8:namespace:{level}", "namespace", level, True) for level in NAMESPACE_LEVELS
        ] + [
            PlatformRole(
                f"d8:subsystem:{scope}:{level}" if scope != "system" else f"d8:system:{level}",
                scope,
                level,
                False,
            )
            for scope in (*SUBSYSTEMS, "system")
            for level in CLUSTER_LEVELS
        ]
    raise ValueError(f"unknown role model {model!r}; one of {LEGACY}, {CAPABILITY}")


def platform_role_objects(model: str) -> list[dict[str, Any]]:
    """The ClusterRoles of `platform_roles(model)`, with their (flattened) aggregation selectors."""
    objects = []
    for role in platform_roles(model):
        lineages = SUBSYSTEMS if role.lineage == "system" else (role.lineage,)
        levels = _up_to(
            LEGACY_USE_LEVELS
            if role.namespaced and model == LEGACY
            else NAMESPACE_LEVELS
            if role.namespaced
            else CLUSTER_LEVELS,
            role.level,
        )
        selectors = []
        for lineage in lineages:
            for level in levels:
                labels = {f"rbac.deckhouse.io/aggregate-to-{lineage}-as": level}
                if model == LEGACY:
                    labels["rbac.deckhouse.io/kind"] = "use" if role.namespaced else "manage"
                selectors.append(labels)
        objects.append(_role(role.name, selectors))
    return objects
