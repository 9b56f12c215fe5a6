"""Authentication by bearer token and RBAC authorization over the stored RBAC objects."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.authn import API_SERVER_AUDIENCE, Identity
from kubeemu.pytest_fixtures import EmulatorFactory, RunningEmulator, api_status

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client

ALICE = Identity(name="alice", token="alice-token", groups=("developers",))
BOT = Identity.service_account("default", "bot", token="bot-token")


@pytest.fixture
def secured(kube_emulator_factory: EmulatorFactory) -> RunningEmulator:
    emulator = kube_emulator_factory(identities=[ALICE, BOT])
    rbac: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "cm-reader", "namespace": "default"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["visible"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-reads", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "metrics"},
            "rules": [{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "bot-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "visible", "namespace": "default"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hidden", "namespace": "default"}},
    ]
    for manifest in rbac:
        emulator.cluster.apply(manifest)
    return emulator


def test_missing_or_unknown_token_is_401(secured: RunningEmulator) -> None:
    for token in ("", "wrong"):
        status, _, body = secured.request("GET", "/api/v1/namespaces", token=token)
        assert (status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_superuser_in_system_masters_bypasses_rbac(secured: RunningEmulator) -> None:
    status, _, _ = secured.request("GET", "/api/v1/namespaces/default/secrets/hidden")
    assert status == 200


def test_role_binding_to_group_grants_namespaced_reads(secured: RunningEmulator) -> None:
    core = client.CoreV1Api(secured.api_client(ALICE))
    assert core.list_namespaced_config_map("default").items == []
    assert core.read_namespaced_secret("visible", "default").metadata.name == "visible"


def test_forbidden_answers_carry_the_apiserver_message(secured: RunningEmulator) -> None:
    core = client.CoreV1Api(secured.api_client(ALICE))
    cases = [
        (
            lambda: core.read_namespaced_secret("hidden", "default"),
            'secrets "hidden" is forbidden: User "alice" cannot get resource "secrets" '
            'in API group "" in the '
            'namespace "default"',
        ),
        (
            lambda: core.list_namespaced_config_map("kube-system"),
            'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the '
            'namespace "kube-system"',
        ),
        (
            core.list_namespace,
            'namespaces is forbidden: User "alice" cannot list resource "namespaces" in API group "" at the '
            "cluster scope",
        ),
        (
            lambda: client.CustomObjectsApi(secured.api_client(ALICE)).list_namespaced_custom_object(
                "example.test", "v1", "default", "widgets"
            ),
            'widgets.example.test is forbidden: User "alice" cannot list resource "widgets" in API group '
            '"example.test" in the namespace "default"',
        ),
    ]
    for call, message in cases:
        with pytest.raises(ApiException) as caught:
            call()
        assert caught.value.status == 403
        status = api_status(caught.value)
        assert (status["reason"], status["message"]) == ("Forbidden", message)


def test_subresource_rules_match_resource_slash_subresource(secured: RunningEmulator) -> None:
    secured.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    core = client.CoreV1Api(secured.api_client(ALICE))
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    assert 'cannot patch resource "pods" in API group ""' in api_status(caught.value)["message"]


def test_non_resource_urls_and_discovery(secured: RunningEmulator) -> None:
    assert secured.request("GET", "/debug/pprof", identity=BOT)[0] == 404  # allowed, then not served
    assert secured.request("GET", "/debug/pprof", identity=ALICE)[0] == 403
    _, _, body = secured.request("GET", "/metrics", identity=ALICE)
    assert body["message"] == 'forbidden: User "alice" cannot get path "/metrics"'
    for path in ("/version", "/api", "/apis", "/api/v1", "/apis/apps/v1", "/openapi/v3"):
        assert secured.request("GET", path, identity=ALICE)[0] == 200, path


def test_token_review_maps_tokens_to_identities(secured: RunningEmulator) -> None:
    auth = client.AuthenticationV1Api(secured.api_client())
    review = auth.create_token_review({"spec": {"token": "bot-token"}})
    assert review.status.authenticated is True
    assert review.status.user.username == "system:serviceaccount:default:bot"
    assert set(review.status.user.groups) == {
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    }
    assert auth.create_token_review({"spec": {"token": "nope"}}).status.authenticated is False


def test_subject_access_review_evaluates_rbac_for_another_user(secured: RunningEmulator) -> None:
    authz = client.AuthorizationV1Api(secured.api_client())

    def allowed(**attributes: str) -> bool:
        review = authz.create_subject_access_review(
            {"spec": {"user": "alice", "groups": ["developers"], "resourceAttributes": attributes}}
        )
        result: bool = review.status.allowed
        return result

    assert allowed(namespace="default", verb="list", resource="configmaps")
    assert allowed(namespace="default", verb="get", resource="secrets", name="visible")
    assert not allowed(namespace="default", verb="get", resource="secrets", name="hidden")
    assert not allowed(namespace="default", verb="get", resource="secrets")
    assert allowed(namespace="default", verb="patch", resource="pods", subresource="status")
    non_resource = authz.create_subject_access_review(
        {
            "spec": {
                "user": "system:serviceaccount:default:bot",
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            }
        }
    )
    assert non_resource.status.allowed is True
    assert 'ClusterRoleBinding "bot-metrics"' in non_resource.status.reason


def test_reviews_are_authorized_for_the_caller(secured: RunningEmulator) -> None:
    with pytest.raises(ApiException) as caught:
        client.AuthorizationV1Api(secured.api_client(ALICE)).create_subject_access_review(
            {"spec": {"user": "x", "resourceAttributes": {"verb": "get", "resource": "pods"}}}
        )
    assert caught.value.status == 403
    review = client.AuthorizationV1Api(secured.api_client(ALICE)).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"namespace": "default", "verb": "watch", "resource": "configmaps"}}}
    )
    assert review.status.allowed is True


def test_token_request_mints_a_service_account_token(secured: RunningEmulator) -> None:
    core = client.CoreV1Api(secured.api_client())
    core.create_namespaced_service_account("default", {"metadata": {"name": "worker"}})
    minted = core.create_namespaced_service_account_token("worker", "default", {"spec": {}})
    assert minted.spec.audiences == [API_SERVER_AUDIENCE]
    status, _, body = secured.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        token=minted.status.token,
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert status == 201
    assert body["status"]["userInfo"]["username"] == "system:serviceaccount:default:worker"


def test_a_token_bound_to_another_audience_is_refused_by_the_api_server(secured: RunningEmulator) -> None:
    core = client.CoreV1Api(secured.api_client())
    core.create_namespaced_service_account("default", {"metadata": {"name": "worker"}})
    minted = core.create_namespaced_service_account_token("worker", "default", {"spec": {"audiences": ["x"]}})
    assert minted.spec.audiences == ["x"]
    status, _, _ = secured.request("GET", "/api/v1/namespaces", token=minted.status.token)
    assert status == 401


def test_token_review_checks_the_audiences_as_the_apiserver_does(secured: RunningEmulator) -> None:
    core = client.CoreV1Api(secured.api_client())
    core.create_namespaced_service_account("default", {"metadata": {"name": "worker"}})
    bound = core.create_namespaced_service_account_token(
        "worker", "default", {"spec": {"audiences": ["ai-models", "other"]}}
    ).status.token
    auth = client.AuthenticationV1Api(secured.api_client())

    def review(token: str, audiences: list[str] | None) -> Any:
        spec: dict[str, Any] = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        return auth.create_token_review({"spec": spec}).status

    # A bound token: accepted for an audience it names, status.audiences is what the two share.
    accepted = review(bound, ["ai-models", "elsewhere"])
    assert accepted.authenticated is True
    assert accepted.audiences == ["ai-models"]
    # The review without audiences means the API server's: a bound token is not for it.
    assert review(bound, None).authenticated is False
    # A token of the API server's audience (a legacy or default token) is refused for another one.
    refused = review("bot-token", ["ai-models"])
    assert refused.authenticated is False
    assert "audiences" in refused.error
    assert review("bot-token", None).audiences == [API_SERVER_AUDIENCE]


def test_impersonation_requires_the_impersonate_verb(secured: RunningEmulator) -> None:
    status, _, body = secured.request(
        "GET",
        "/api/v1/namespaces/default/secrets/hidden",
        headers={"Impersonate-User": "alice", "Impersonate-Group": "developers"},
    )
    assert status == 403
    assert 'User "alice" cannot get resource "secrets"' in body["message"]
    status, _, body = secured.request(
        "GET", "/api/v1/namespaces", identity=ALICE, headers={"Impersonate-User": "admin"}
    )
    assert (status, body["message"]) == (
        403,
        'users "admin" is forbidden: User "alice" cannot impersonate '
        'resource "users" in API group "" at the cluster scope',
    )


def test_cluster_role_aggregation_rule_collects_labelled_roles(secured: RunningEmulator) -> None:
    secured.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "aggregate"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]},
        }
    )
    secured.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "piece", "labels": {"agg": "yes"}},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
    )
    secured.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "alice-aggregate"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "aggregate"},
            "subjects": [{"kind": "User", "name": "alice"}],
        }
    )
    assert client.CoreV1Api(secured.api_client(ALICE)).list_node().items == []
