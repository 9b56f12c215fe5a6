"""Deckhouse access levels granted through the module's user-authz ClusterRoles (fixture copies here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import EmulatorFactory, RunningEmulator
from testbed.access_levels import ACCESS_LEVELS, grant_access_level, included_levels, module_role_name

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client
# The emulator's own fixture CRDs (Widget, namespaced; Gadget, cluster-scoped).
EMULATOR_FIXTURES = Path(__file__).parents[1] / "emulator" / "fixtures"

# One marker rule per level, so every binding can be told apart by what it allows.
_MARKERS = {
    "User": ("get", "widgets"),
    "PrivilegedUser": ("list", "widgets"),
    "Editor": ("create", "widgets"),
    "Admin": ("delete", "widgets"),
    "ClusterEditor": ("create", "gadgets"),
    "ClusterAdmin": ("delete", "gadgets"),
}


def _role(level: str) -> dict[str, Any]:
    verb, resource = _MARKERS[level]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": module_role_name(level),
            "annotations": {"user-authz.deckhouse.io/access-level": level},
        },
        "rules": [{"apiGroups": ["example.test"], "resources": [resource], "verbs": [verb]}],
    }


@pytest.fixture
def levelled(kube_emulator_factory: EmulatorFactory) -> RunningEmulator:
    emulator = kube_emulator_factory(crd_dirs=[EMULATOR_FIXTURES])
    for level in ACCESS_LEVELS:
        emulator.cluster.apply(_role(level))
    return emulator


def _can(
    emulator: RunningEmulator, identity: Identity, verb: str, resource: str, namespace: str = ""
) -> bool:
    review = client.AuthorizationV1Api(emulator.api_client(identity)).create_self_subject_access_review(
        {
            "spec": {
                "resourceAttributes": {
                    "group": "example.test",
                    "verb": verb,
                    "resource": resource,
                    "namespace": namespace,
                }
            }
        }
    )
    allowed: bool = review.status.allowed
    return allowed


def test_levels_are_cumulative_like_deckhouse() -> None:
    assert included_levels("Admin") == ("User", "PrivilegedUser", "Editor", "Admin")
    assert included_levels("ClusterEditor") == ("User", "PrivilegedUser", "Editor", "ClusterEditor")
    assert set(included_levels("ClusterAdmin")) == set(ACCESS_LEVELS)
    assert module_role_name("ClusterEditor") == "d8:user-authz:ai-models:cluster-editor"


@pytest.mark.parametrize("level", ACCESS_LEVELS)
def test_cluster_wide_grant_binds_every_included_level(levelled: RunningEmulator, level: str) -> None:
    who = levelled.add_identity(Identity(name=f"user-{level.lower()}", token=f"t-{level}"))
    grant_access_level(levelled.cluster, who, level)
    for marker_level, (verb, resource) in _MARKERS.items():
        expected = marker_level in included_levels(level)
        namespace = "default" if resource == "widgets" else ""
        assert _can(levelled, who, verb, resource, namespace) is expected, (marker_level, verb, resource)


def test_namespace_limited_grant_stays_in_its_namespace(levelled: RunningEmulator) -> None:
    who = levelled.add_identity(Identity(name="ns-user", token="t-ns"))
    grant_access_level(levelled.cluster, who, "ClusterEditor", namespace="default")
    assert _can(levelled, who, "get", "widgets", "default")
    assert not _can(levelled, who, "get", "widgets", "kube-system")
    assert not _can(levelled, who, "create", "gadgets")  # cluster-scoped kinds stay out of reach


def test_cluster_admin_gets_the_deckhouse_stand_in_for_core_kinds(levelled: RunningEmulator) -> None:
    admin = levelled.add_identity(Identity(name="dev-admin", token="t-admin"))
    user = levelled.add_identity(Identity(name="dev-user", token="t-user"))
    grant_access_level(levelled.cluster, admin, "ClusterAdmin")
    grant_access_level(levelled.cluster, user, "User")
    client.CoreV1Api(levelled.api_client(admin)).create_namespace({"metadata": {"name": "made-by-admin"}})
    assert levelled.request("GET", "/api/v1/namespaces", identity=user)[0] == 403
    assert (
        levelled.request(
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            identity=admin,
            body={"metadata": {"name": "x"}},
        )[0]
        == 403
    )  # no RBAC writes
