"""The documented access matrix is what a cluster really enforces with the module's rendered roles.

The emulator stores the ClusterRoles Helm renders from `templates/`, Deckhouse-style bindings give
subjects their access levels, and SubjectAccessReview answers are evaluated from those stored RBAC
objects, exactly the path the catalog API will use to authorize a caller.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import RunningEmulator
from support.access_matrix import GUIDES, RESOURCES, Matrix, documented_matrix
from testbed.access_levels import ACCESS_LEVELS, grant_access_level
from testbed.devstack import module_rbac_objects

client: Any = typed_client  # the generated client's pydantic types reject plain dict bodies

GROUP = "ai.deckhouse.io"
NAMESPACE = "default"
READ_VERBS = {"get", "list", "watch"}
WRITE_VERBS = {"create", "update", "patch", "delete"}
# The catalog API authorizes only get and list; there is nothing to watch or write.
CATALOG_READ_VERBS = {"get", "list"}
NAMESPACED = {"models"}


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
