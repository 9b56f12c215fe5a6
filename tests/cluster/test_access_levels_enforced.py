"""The documented access matrix is what a cluster really enforces with the module's rendered roles.

The emulator stores the ClusterRoles Helm renders from `templates/`, Deckhouse-style bindings give
subjects their access levels, and SubjectAccessReview answers are evaluated from those stored RBAC
objects, exactly the path the catalog API will use to authorize a caller. The experimental role
model is enforced the same way for both platform generations: the module's objects rendered for
Deckhouse 1.77 (legacy use/manage) and 1.78 (capabilities), aggregated into the platform's roles of
that generation (testbed.platform_roles), must grant exactly what the guide's capability table
says, per namespace for the namespace roles.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import RunningEmulator
from support.access_matrix import GUIDES, RESOURCES, Matrix, documented_capabilities, documented_matrix
from support.scenarios import scenario
from testbed.access_levels import ACCESS_LEVELS, grant_access_level
from testbed.devstack import module_rbac_objects
from testbed.platform_roles import CAPABILITY, LEGACY, PlatformRole, platform_role_objects, platform_roles

client: Any = typed_client  # the generated client's pydantic types reject plain dict bodies

GROUP = "ai.deckhouse.io"
NAMESPACE = "default"
READ_VERBS = {"get", "list", "watch"}
WRITE_VERBS = {"create", "update", "patch", "delete"}
# The catalog API authorizes only get and list; there is nothing to watch or write.
CATALOG_READ_VERBS = {"get", "list"}
NAMESPACED = {"models"}
# The value scenario whose Deckhouse version renders each role model.
MODEL_SCENARIO = {LEGACY: "deckhouse-1-77", CAPABILITY: "deckhouse-1-78"}
CLUSTER_LEVEL_ORDER = ("viewer", "manager")
NAMESPACE_LEVEL_ORDER = ("viewer", "user", "manager", "admin", "superadmin")


@pytest.fixture
def cluster(kube_emulator: RunningEmulator) -> RunningEmulator:
    for role in module_rbac_objects():
        kube_emulator.cluster.apply(role)
    return kube_emulator


def _identity(cluster: RunningEmulator, name: str) -> Identity:
    return cluster.add_identity(Identity(name=name, token=new_token(), groups=("team",)))


def _allowed(api: Any, identity: Identity, *, verb: str, resource: str, namespace: str | None) -> bool:
    attributes = {"group": GROUP, "resource": resource, "verb": verb}
    if namespace is not None:
        attributes["namespace"] = namespace
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": identity.name,
                "groups": list(identity.all_groups),
                "resourceAttributes": attributes,
            },
        }
    )
    allowed: bool = review.status.allowed
    return allowed


def _enforced(api: Any, identity: Identity, *, namespace: str) -> dict[str, frozenset[str]]:
    granted: dict[str, frozenset[str]] = {}
    for resource in RESOURCES:
        scope = namespace if resource in NAMESPACED else None
        read = CATALOG_READ_VERBS if resource == "catalogimports" else READ_VERBS

        def allows(verbs: set[str], resource: str = resource, scope: str | None = scope) -> bool:
            return all(
                _allowed(api, identity, verb=verb, resource=resource, namespace=scope) for verb in verbs
            )

        granted[resource] = frozenset(
            name for name, verbs in (("read", read), ("write", WRITE_VERBS)) if allows(verbs)
        )
    return granted


@pytest.mark.parametrize("guide", GUIDES)
def test_cluster_wide_levels_enforce_exactly_the_documented_matrix(
    cluster: RunningEmulator, guide: str
) -> None:
    api = cluster.api_client()
    enforced: Matrix = {}
    for level in ACCESS_LEVELS:
        identity = _identity(cluster, f"{level.lower()}-subject")
        grant_access_level(cluster.cluster, identity, level)
        enforced[level] = _enforced(api, identity, namespace=NAMESPACE)
    assert enforced == documented_matrix(guide)


def test_namespace_limited_user_reads_models_there_and_nothing_cluster_scoped(
    cluster: RunningEmulator,
) -> None:
    api = cluster.api_client()
    user = _identity(cluster, "limited-user")
    grant_access_level(cluster.cluster, user, "User", namespace=NAMESPACE)
    assert _enforced(api, user, namespace=NAMESPACE) == {
        "models": frozenset({"read"}),
        "clustermodels": frozenset(),
        "modelcatalogsources": frozenset(),
        "catalogimports": frozenset(),
    }
    assert _enforced(api, user, namespace="kube-system")["models"] == frozenset()


def test_forbidden_reads_and_writes_are_refused_by_the_api_itself(cluster: RunningEmulator) -> None:
    user = _identity(cluster, "limited-user")
    grant_access_level(cluster.cluster, user, "User", namespace=NAMESPACE)
    objects = client.CustomObjectsApi(cluster.api_client(user))
    assert objects.list_namespaced_custom_object(GROUP, "v1alpha1", NAMESPACE, "models")["items"] == []
    with pytest.raises(ApiException) as listing:
        objects.list_cluster_custom_object(GROUP, "v1alpha1", "clustermodels")
    assert listing.value.status == 403
    model = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Model",
        "metadata": {"name": "m1", "namespace": NAMESPACE},
        "spec": {"source": {"upload": {}}},
    }
    with pytest.raises(ApiException) as creation:
        objects.create_namespaced_custom_object(GROUP, "v1alpha1", NAMESPACE, "models", model)
    assert creation.value.status == 403
    message = json.loads(creation.value.body or "{}")["message"]
    assert 'User "limited-user" cannot create resource "models"' in message


def test_token_review_names_the_subject_a_component_will_authorize(cluster: RunningEmulator) -> None:
    user = _identity(cluster, "catalog-browser")
    grant_access_level(cluster.cluster, user, "User")
    review = client.AuthenticationV1Api(cluster.api_client()).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": user.token}}
    )
    assert review.status.authenticated is True
    assert review.status.user.username == "catalog-browser"
    assert "system:authenticated" in review.status.user.groups
    unknown = client.AuthenticationV1Api(cluster.api_client()).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "forged"}}
    )
    assert not unknown.status.authenticated


# ----- experimental role model (rbacv2) --------------------------------------------------------------


def _bind(cluster: RunningEmulator, identity: Identity, role: PlatformRole) -> None:
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding" if role.namespaced else "ClusterRoleBinding",
        "metadata": {"name": f"kubeemu:{identity.name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity.name}],
    }
    if role.namespaced:
        binding["metadata"]["namespace"] = NAMESPACE
    cluster.cluster.apply(binding)


def _aggregated_into(cell: str) -> tuple[str, str]:
    lineage, level = re.findall(r"`([^`]+)`", cell)
    return lineage, level


def _documented_grants(guide: str, model: str, role: PlatformRole) -> dict[str, frozenset[str]]:
    """What the guide says `role` grants in NAMESPACE: the union of the model's capabilities it
    aggregates (its lineage, at its level or below); a namespace role reaches no cluster-scoped kind."""
    order = NAMESPACE_LEVEL_ORDER if role.namespaced else CLUSTER_LEVEL_ORDER
    granted: dict[str, set[str]] = {resource: set() for resource in RESOURCES}
    for row in documented_capabilities(guide).values():
        if row.model != model:
            continue
        lineage, level = _aggregated_into(row.aggregated_into)
        in_lineage = lineage == role.lineage or (role.lineage == "system" and lineage != "namespace")
        if in_lineage and level in order and order.index(level) <= order.index(role.level):
            for resource in RESOURCES:
                if role.namespaced and resource not in NAMESPACED:
                    continue
                granted[resource] |= row.grants[resource]
    return {resource: frozenset(access) for resource, access in granted.items()}


@pytest.fixture(params=[LEGACY, CAPABILITY])
def role_model(request: pytest.FixtureRequest, kube_emulator: RunningEmulator) -> tuple[str, RunningEmulator]:
    """An emulator with one platform generation's roles and the module's objects rendered for it."""
    model: str = request.param
    for role in platform_role_objects(model):
        kube_emulator.cluster.apply(role)
    for obj in module_rbac_objects(scenario(MODEL_SCENARIO[model]).render()):
        kube_emulator.cluster.apply(obj)
    return model, kube_emulator


@pytest.mark.parametrize("guide", GUIDES)
def test_platform_roles_enforce_exactly_the_documented_capabilities(
    role_model: tuple[str, RunningEmulator], guide: str
) -> None:
    model, cluster = role_model
    api = cluster.api_client()
    enforced, documented = {}, {}
    for role in platform_roles(model):
        identity = _identity(cluster, role.name.replace(":", "-"))
        _bind(cluster, identity, role)
        enforced[role.name] = _enforced(api, identity, namespace=NAMESPACE)
        documented[role.name] = _documented_grants(guide, model, role)
    assert enforced == documented


def test_namespace_roles_grant_models_in_their_namespace_only(
    role_model: tuple[str, RunningEmulator],
) -> None:
    model, cluster = role_model
    api = cluster.api_client()
    namespace_role = next(
        role for role in platform_roles(model) if role.namespaced and role.level == "manager"
    )
    tenant = _identity(cluster, "tenant")
    _bind(cluster, tenant, namespace_role)
    assert _enforced(api, tenant, namespace=NAMESPACE)["models"] == frozenset({"read", "write"})
    assert _enforced(api, tenant, namespace="kube-system")["models"] == frozenset()


@pytest.mark.parametrize(
    ("rendered_for", "models"), [("deckhouse-1-77", frozenset({"read"})), ("deckhouse-1-78", frozenset())]
)
def test_on_1_78_a_subsystem_role_gets_no_models_in_tenant_namespaces(
    kube_emulator: RunningEmulator, rendered_for: str, models: frozenset[str]
) -> None:
    # What the version switch prevents: the legacy use objects on a 1.78 platform land in the
    # kubernetes subsystem roles, granting Models in every namespace; the capabilities do not.
    for role in platform_role_objects(CAPABILITY):
        kube_emulator.cluster.apply(role)
    for obj in module_rbac_objects(scenario(rendered_for).render()):
        kube_emulator.cluster.apply(obj)
    viewer = _identity(kube_emulator, "kubernetes-viewer")
    _bind(
        kube_emulator, viewer, PlatformRole("d8:subsystem:kubernetes:viewer", "kubernetes", "viewer", False)
    )
    assert _enforced(kube_emulator.api_client(), viewer, namespace="tenant-a")["models"] == models
