"""Access levels: the rendered user-authz and rbacv2 roles against the tables in the admin guide.

The effective matrix is derived from the rendered roles with the cumulative semantics of
user-authz; the English and Russian guides must show exactly that matrix, so changing a role
without the docs (or the docs without the role) fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from support.access_matrix import (
    GUIDES,
    RESOURCES,
    Matrix,
    documented_capabilities,
    documented_matrix,
)
from support.paths import DOCS_DIR
from support.render import RenderedChart
from support.scenarios import scenario

GROUP = "ai.deckhouse.io"
READ = {
    "models": {"get", "list", "watch"},
    "clustermodels": {"get", "list", "watch"},
    "modelcatalogsources": {"get", "list", "watch"},
    "catalogimports": {"get", "list"},
    "moduleconfigs": {"get", "list", "watch"},
}
WRITE = {
    "models": {"create", "update", "patch", "delete"},
    "clustermodels": {"create", "update", "patch", "delete"},
    "modelcatalogsources": {"create", "update", "patch", "delete"},
    "catalogimports": {"create", "update", "patch", "delete"},
    "moduleconfigs": {"update", "patch"},
}
# Which levels each level includes (user-authz semantics).
INCLUDES: dict[str, tuple[str, ...]] = {
    "User": (),
    "PrivilegedUser": ("User",),
    "Editor": ("PrivilegedUser",),
    "Admin": ("Editor",),
    "ClusterEditor": ("Editor",),
    "ClusterAdmin": ("Admin", "ClusterEditor"),
}
ROLE_NAMES = {
    "User": "user",
    "PrivilegedUser": "privileged-user",
    "Editor": "editor",
    "Admin": "admin",
    "ClusterEditor": "cluster-editor",
    "ClusterAdmin": "cluster-admin",
}
RBACV2_ROLES = (
    "d8:use:capability:module:ai-models:view",
    "d8:use:capability:module:ai-models:edit",
    "d8:manage:permission:module:ai-models:view",
    "d8:manage:permission:module:ai-models:edit",
)


@cache
def rendered() -> RenderedChart:
    return scenario("minimal").render()


def cluster_roles() -> dict[str, dict[str, Any]]:
    return {role["metadata"]["name"]: role for role in rendered().of_kind("ClusterRole")}


def verbs_on(rules: Iterable[Mapping[str, Any]], resource: str) -> set[str]:
    group = "deckhouse.io" if resource == "moduleconfigs" else GROUP
    verbs: set[str] = set()
    for rule in rules:
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []):
            verbs |= set(rule.get("verbs", []))
    return verbs


def access(verbs: set[str], resource: str) -> frozenset[str]:
    granted = set()
    if READ[resource] <= verbs:
        granted.add("read")
    if WRITE[resource] <= verbs:
        granted.add("write")
    return frozenset(granted)


def user_authz_levels() -> dict[str, list[dict[str, Any]]]:
    """Own rules of each access level, from the rendered user-authz roles."""
    levels: dict[str, list[dict[str, Any]]] = {}
    for role in cluster_roles().values():
        level = (role["metadata"].get("annotations") or {}).get("user-authz.deckhouse.io/access-level")
        if level is not None:
            assert level not in levels, f"two roles for access level {level}"
            levels[level] = role.get("rules") or []
    return levels


def effective_rules(level: str, own: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rules = list(own.get(level, []))
    for included in INCLUDES[level]:
        rules += effective_rules(included, own)
    return rules


def rendered_matrix() -> Matrix:
    own = user_authz_levels()
    return {
        level: {
            resource: access(verbs_on(effective_rules(level, own), resource), resource)
            for resource in RESOURCES
        }
        for level in INCLUDES
    }


# ----- user-authz ---------------------------------------------------------------------------------


def test_every_access_level_has_its_role_named_and_annotated_by_convention() -> None:
    roles = cluster_roles()
    for level, suffix in ROLE_NAMES.items():
        role = roles[f"d8:user-authz:ai-models:{suffix}"]
        assert role["metadata"]["annotations"] == {"user-authz.deckhouse.io/access-level": level}
        assert role["metadata"]["labels"] == {"heritage": "deckhouse", "module": "ai-models"}
    assert set(user_authz_levels()) == set(INCLUDES)


def test_levels_that_add_nothing_render_empty_rules() -> None:
    own = user_authz_levels()
    assert own["PrivilegedUser"] == own["Admin"] == own["ClusterAdmin"] == []


def test_derived_matrix_grants_reads_to_user_and_writes_by_scope() -> None:
    matrix = rendered_matrix()
    everything_readable = {resource: frozenset({"read"}) for resource in RESOURCES}
    assert matrix["User"] == everything_readable
    assert matrix["Editor"] == {**everything_readable, "models": frozenset({"read", "write"})}
    assert matrix["ClusterEditor"] == {
        **everything_readable,
        "models": frozenset({"read", "write"}),
        "clustermodels": frozenset({"read", "write"}),
        "modelcatalogsources": frozenset({"read", "write"}),
    }
    assert matrix["ClusterAdmin"] == matrix["ClusterEditor"]


def test_catalog_api_is_granted_exactly_get_and_list() -> None:
    own = user_authz_levels()
    assert verbs_on(effective_rules("ClusterAdmin", own), "catalogimports") == {"get", "list"}


@pytest.mark.parametrize("guide", GUIDES)
def test_documented_matrix_equals_the_rendered_roles(guide: str) -> None:
    assert documented_matrix(guide) == rendered_matrix()


# ----- rbacv2 ------------------------------------------------------------------------------------


def aggregation(role: Mapping[str, Any]) -> tuple[str, str]:
    labels = role["metadata"]["labels"]
    found = [
        (match.group(1), value)
        for key, value in labels.items()
        if (match := re.fullmatch(r"rbac\.deckhouse\.io/aggregate-to-(.+)-as", key))
    ]
    assert len(found) == 1, f"{role['metadata']['name']} must aggregate into exactly one role"
    return found[0]


def test_rbacv2_roles_carry_the_role_model_labels() -> None:
    roles = cluster_roles()
    for name in RBACV2_ROLES:
        labels = roles[name]["metadata"]["labels"]
        tier = "use" if ":use:" in name else "manage"
        assert labels["rbac.deckhouse.io/kind"] == tier
        assert aggregation(roles[name]) == ("kubernetes", "viewer" if name.endswith(":view") else "manager")
        if tier == "manage":
            assert labels["rbac.deckhouse.io/level"] == "module"
            assert labels["rbac.deckhouse.io/namespace"] == "d8-ai-models"


def test_use_capabilities_never_reach_cluster_scoped_resources() -> None:
    roles = cluster_roles()
    for name in RBACV2_ROLES[:2]:
        for rule in roles[name]["rules"]:
            assert {resource.split("/")[0] for resource in rule["resources"]} == {"models"}


def test_module_config_access_is_limited_to_the_module() -> None:
    roles = cluster_roles()
    for name in RBACV2_ROLES[2:]:
        config_rules = [rule for rule in roles[name]["rules"] if "moduleconfigs" in rule["resources"]]
        assert config_rules
        assert all(rule["resourceNames"] == ["ai-models"] for rule in config_rules)


@pytest.mark.parametrize("guide", GUIDES)
def test_documented_capabilities_equal_the_rendered_rbacv2_roles(guide: str) -> None:
    documented = documented_capabilities(guide)
    assert sorted(documented) == sorted(RBACV2_ROLES)
    roles = cluster_roles()
    for name, (aggregated_into, grants) in documented.items():
        subsystem, level = aggregation(roles[name])
        assert f"`{subsystem}`" in aggregated_into
        assert f"`{level}`" in aggregated_into
        rules = roles[name]["rules"]
        assert grants == {resource: access(verbs_on(rules, resource), resource) for resource in grants}


# ----- every module role ---------------------------------------------------------------------------


def test_no_module_role_uses_wildcards_or_touches_foreign_resources() -> None:
    allowed = {f"{resource}{suffix}" for resource in RESOURCES for suffix in ("", "/status")} | {
        "moduleconfigs"
    }
    for name, role in cluster_roles().items():
        if name.startswith("d8:ai-models:"):
            continue  # the components' own roles: tests/render/test_controller_and_api.py
        for rule in role.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(field, []), f"{name}: wildcard in {field}"
            assert set(rule["resources"]) <= allowed, f"{name}: unexpected resources {rule['resources']}"


# ----- the prose the matrix relies on ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("guide", "phrases"),
    [
        ("ADMIN_GUIDE.md", ("cumulative", "without a namespace limit", "403", "catalogimports")),
        (
            "ADMIN_GUIDE.ru.md",
            ("накопительные", "без ограничения по пространствам имен", "403", "catalogimports"),
        ),
    ],
)
def test_guides_explain_cumulative_levels_and_the_namespace_limit(
    guide: str, phrases: tuple[str, ...]
) -> None:
    text = (DOCS_DIR / guide).read_text(encoding="utf-8")
    assert text.startswith("---\ntitle: ")
    for phrase in phrases:
        assert phrase in text, f"{guide} must mention {phrase!r}"


def test_english_guide_has_no_cyrillic() -> None:
    assert not re.search("[А-Яа-яЁё]", Path(DOCS_DIR / "ADMIN_GUIDE.md").read_text(encoding="utf-8"))
