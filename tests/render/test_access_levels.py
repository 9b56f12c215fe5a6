"""Access levels: the rendered user-authz and rbacv2 roles against the tables in the admin guide.

The effective matrix is derived from the rendered roles with the cumulative semantics of
user-authz; the English and Russian guides must show exactly that matrix, so changing a role
without the docs (or the docs without the role) fails here. The rbacv2 objects depend on the
Deckhouse version (the capability model from 1.78, the legacy use/manage model before): each
version scenario renders exactly the documented rows of its model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.access_matrix import (
    GUIDES,
    RESOURCES,
    Matrix,
    documented_capabilities,
    documented_matrix,
)
from support.paths import DOCS_DIR, REPO_ROOT
from support.render import RenderedChart, render_chart
from support.scenarios import scenario
from support.values import MINIMAL_SETTINGS, module_values

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
# Levels that add rights on the module's resources, and the suffix of their role's name. The
# others (PrivilegedUser, Admin, ClusterAdmin) add nothing and have no role.
ROLE_NAMES = {
    "User": "user",
    "Editor": "editor",
    "ClusterEditor": "cluster-editor",
}
LEGACY_ROLES = (
    "d8:use:capability:module:ai-models:view",
    "d8:use:capability:module:ai-models:edit",
    "d8:manage:permission:module:ai-models:view",
    "d8:manage:permission:module:ai-models:edit",
)
CAPABILITY_ROLES = (
    "d8:namespace-capability:ai-models:view",
    "d8:namespace-capability:ai-models:edit",
    "d8:system-capability:ai-models:view",
    "d8:system-capability:ai-models:edit",
)
# Value scenarios by the role model their Deckhouse version selects; "minimal" is the current
# release (support.values.DEFAULT_GLOBAL).
MODEL_SCENARIOS = {
    "deckhouse-1-75": "legacy",
    "deckhouse-1-77": "legacy",
    "deckhouse-1-78": "capability",
    "deckhouse-dev": "capability",
    "deckhouse-version-unknown": "capability",
    "deckhouse-version-absent": "capability",
    "minimal": "capability",
}
# The RBAC subsystems of the platform (deckhouse modules/140-user-authz/docs/internal/
# RBACV2_MODULE_MIGRATION.md, "What changed in the model").
PLATFORM_SUBSYSTEMS = {
    "deckhouse",
    "infrastructure",
    "kubernetes",
    "networking",
    "observability",
    "security",
    "storage",
}
I18N_ANNOTATIONS = (
    "en.meta.deckhouse.io/title",
    "ru.meta.deckhouse.io/title",
    "en.meta.deckhouse.io/description",
    "ru.meta.deckhouse.io/description",
)
NAMESPACED = {"models"}


@cache
def rendered(name: str = "minimal") -> RenderedChart:
    return scenario(name).render()


def cluster_roles(name: str = "minimal") -> dict[str, dict[str, Any]]:
    return {role["metadata"]["name"]: role for role in rendered(name).of_kind("ClusterRole")}


def rbacv2_roles(name: str = "minimal") -> dict[str, dict[str, Any]]:
    """The rendered objects of the experimental role model (everything labelled rbac.deckhouse.io/kind)."""
    return {
        role_name: role
        for role_name, role in cluster_roles(name).items()
        if "rbac.deckhouse.io/kind" in (role["metadata"].get("labels") or {})
    }


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


def user_authz_levels(name: str = "minimal") -> dict[str, list[dict[str, Any]]]:
    """Own rules of each access level, from the rendered user-authz roles."""
    levels: dict[str, list[dict[str, Any]]] = {}
    for role in cluster_roles(name).values():
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


def rendered_matrix(name: str = "minimal") -> Matrix:
    own = user_authz_levels(name)
    return {
        level: {
            resource: access(verbs_on(effective_rules(level, own), resource), resource)
            for resource in RESOURCES
        }
        for level in INCLUDES
    }


# ----- user-authz ---------------------------------------------------------------------------------


def test_every_level_with_rights_has_its_role_named_and_annotated_by_convention() -> None:
    roles = cluster_roles()
    for level, suffix in ROLE_NAMES.items():
        role = roles[f"d8:user-authz:ai-models:{suffix}"]
        assert role["metadata"]["annotations"] == {"user-authz.deckhouse.io/access-level": level}
        assert role["metadata"]["labels"] == {"heritage": "deckhouse", "module": "ai-models"}
    assert set(user_authz_levels()) == set(ROLE_NAMES)


@pytest.mark.parametrize("name", MODEL_SCENARIOS)
def test_no_access_level_role_is_empty(name: str) -> None:
    # A level that adds nothing gets no role at all (user-authz binds whatever roles carry a
    # level's annotation), rather than a role with `rules: []`.
    for level, rules in user_authz_levels(name).items():
        assert rules, f"the {level} role of {name} grants nothing; drop it"
    names = {role for role in cluster_roles(name) if role.startswith("d8:user-authz:")}
    assert names == {f"d8:user-authz:ai-models:{suffix}" for suffix in ROLE_NAMES.values()}


@pytest.mark.parametrize("name", MODEL_SCENARIOS)
def test_user_authz_levels_do_not_depend_on_the_deckhouse_version(name: str) -> None:
    assert rendered_matrix(name) == rendered_matrix()


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


def module_subsystems() -> list[str]:
    loaded = yaml.safe_load((REPO_ROOT / "module.yaml").read_text(encoding="utf-8"))
    subsystems: list[str] = loaded["subsystems"]
    return subsystems


def resources_of(role: Mapping[str, Any]) -> set[str]:
    return {resource.split("/")[0] for rule in role["rules"] for resource in rule["resources"]}


@pytest.mark.parametrize(("name", "model"), MODEL_SCENARIOS.items())
def test_the_deckhouse_version_selects_the_role_model(name: str, model: str) -> None:
    expected = CAPABILITY_ROLES if model == "capability" else LEGACY_ROLES
    assert sorted(rbacv2_roles(name)) == sorted(expected)


@pytest.mark.parametrize(
    ("version", "model"),
    [
        ("1.75.0", "legacy"),
        ("v1.77.99", "legacy"),
        ("1.77", "legacy"),
        ("v1.78.0-rc.1", "capability"),
        ("1.78.0", "capability"),
        ("v1.80.2+build.7", "capability"),
        ("v2.0.0", "capability"),
        ("test", "capability"),
    ],
)
def test_version_boundary_and_formats(version: str, model: str) -> None:
    chart = render_chart(module_values(MINIMAL_SETTINGS, global_overrides={"deckhouseVersion": version}))
    kinds = {
        role["metadata"]["labels"]["rbac.deckhouse.io/kind"]
        for role in chart.of_kind("ClusterRole")
        if "rbac.deckhouse.io/kind" in (role["metadata"].get("labels") or {})
    }
    assert kinds == ({"capability"} if model == "capability" else {"use", "manage"})


@pytest.mark.parametrize("name", [name for name, model in MODEL_SCENARIOS.items() if model == "capability"])
def test_capabilities_follow_the_platform_contract(name: str) -> None:
    # The contract of deckhouse testing/rbacv2 as RBACV2_MODULE_MIGRATION.md states it.
    markers = []
    for role_name, role in rbacv2_roles(name).items():
        metadata = role["metadata"]
        labels = metadata["labels"]
        scope = labels["rbac.deckhouse.io/scope"]
        action = role_name.rsplit(":", 1)[1]
        assert labels["rbac.deckhouse.io/kind"] == "capability"
        assert role_name == f"d8:{scope}-capability:ai-models:{action}"
        assert labels["rbac.deckhouse.io/capability"] == f"{scope}-capability.ai-models.{action}"
        markers.append(labels["rbac.deckhouse.io/capability"])
        assert labels["module"] == "ai-models"
        assert "rbac.deckhouse.io/level" not in labels
        assert all(metadata["annotations"][key] for key in I18N_ANNOTATIONS)
        assert role["rules"]
        assert "aggregationRule" not in role
        lineage, level = aggregation(role)
        assert level == ("viewer" if action == "view" else "manager")
        if scope == "namespace":
            assert lineage == "namespace"
            assert "rbac.deckhouse.io/namespace" not in labels
            assert resources_of(role) <= NAMESPACED  # a RoleBinding reaches nothing else
        else:
            assert scope == "system"
            assert lineage in module_subsystems()
            assert labels["rbac.deckhouse.io/namespace"] == "d8-ai-models"
            assert not resources_of(role) & NAMESPACED  # Models are granted per namespace only
    assert len(markers) == len(set(markers))


@pytest.mark.parametrize("name", [name for name, model in MODEL_SCENARIOS.items() if model == "legacy"])
def test_legacy_roles_carry_the_role_model_labels(name: str) -> None:
    roles = rbacv2_roles(name)
    for role_name in LEGACY_ROLES:
        labels = roles[role_name]["metadata"]["labels"]
        tier = "use" if ":use:" in role_name else "manage"
        assert labels["rbac.deckhouse.io/kind"] == tier
        level = "viewer" if role_name.endswith(":view") else "manager"
        assert aggregation(roles[role_name]) == ("kubernetes", level)
        if tier == "manage":
            assert labels["rbac.deckhouse.io/level"] == "module"
            assert labels["rbac.deckhouse.io/namespace"] == "d8-ai-models"
        else:
            assert resources_of(roles[role_name]) == NAMESPACED


def test_module_subsystems_are_the_platforms_and_the_ones_capabilities_aggregate_into() -> None:
    subsystems = module_subsystems()
    assert set(subsystems) <= PLATFORM_SUBSYSTEMS, f"module.yaml subsystems {subsystems}"
    aggregated = {
        aggregation(role)[0]
        for name in MODEL_SCENARIOS
        for role in rbacv2_roles(name).values()
        if role["metadata"]["labels"].get("rbac.deckhouse.io/scope") == "system"
        or role["metadata"]["labels"]["rbac.deckhouse.io/kind"] == "manage"
    }
    assert aggregated == set(subsystems)


@pytest.mark.parametrize("name", MODEL_SCENARIOS)
def test_module_config_access_is_limited_to_the_module(name: str) -> None:
    for role_name, role in rbacv2_roles(name).items():
        config_rules = [rule for rule in role["rules"] if "moduleconfigs" in rule["resources"]]
        tier = "manage" if ":manage:" in role_name or ":system-" in role_name else "use"
        assert bool(config_rules) == (tier == "manage"), role_name
        assert all(rule["resourceNames"] == ["ai-models"] for rule in config_rules)


@pytest.mark.parametrize("guide", GUIDES)
@pytest.mark.parametrize(("name", "model"), MODEL_SCENARIOS.items())
def test_documented_capabilities_equal_the_rendered_rbacv2_roles(guide: str, name: str, model: str) -> None:
    documented = {
        role_name: row for role_name, row in documented_capabilities(guide).items() if row.model == model
    }
    roles = rbacv2_roles(name)
    assert sorted(documented) == sorted(roles)
    for role_name, row in documented.items():
        lineage, level = aggregation(roles[role_name])
        assert f"`{lineage}`" in row.aggregated_into
        assert f"`{level}`" in row.aggregated_into
        rules = roles[role_name]["rules"]
        assert row.grants == {
            resource: access(verbs_on(rules, resource), resource) for resource in row.grants
        }


def test_the_guides_document_both_models_in_full() -> None:
    for guide in GUIDES:
        documented = documented_capabilities(guide)
        assert sorted(documented) == sorted(CAPABILITY_ROLES + LEGACY_ROLES)


# ----- every module role ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario_name", MODEL_SCENARIOS)
def test_no_module_role_uses_wildcards_or_touches_foreign_resources(scenario_name: str) -> None:
    allowed = {f"{resource}{suffix}" for resource in RESOURCES for suffix in ("", "/status")} | {
        "moduleconfigs"
    }
    for name, role in cluster_roles(scenario_name).items():
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
