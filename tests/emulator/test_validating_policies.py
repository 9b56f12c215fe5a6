"""ValidatingAdmissionPolicies and their bindings, as the apiserver evaluates them: resource rules,
selectors, matchConditions, variables, the CEL variables (object, oldObject, request with userInfo
extra of a pod-bound token, namespaceObject), messages, reasons, failurePolicy and binding actions.
Every write goes over HTTP; a refusal stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator

POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
NODES = "/api/v1/nodes"
MERGE = "application/merge-patch+json"


def policy(
    name: str,
    validations: list[dict[str, Any]],
    *,
    resources: tuple[str, ...] = ("configmaps",),
    operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE"),
    **spec: Any,
) -> dict[str, Any]:
    constraints = spec.pop("matchConstraints", {})
    constraints.setdefault(
        "resourceRules",
        [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": list(operations),
                "resources": list(resources),
            }
        ],
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": constraints,
            "validations": validations,
            **spec,
        },
    }


def binding(
    name: str, policy_name: str, *, actions: tuple[str, ...] = ("Deny",), **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": list(actions), **spec},
    }


def install(emulator: RunningEmulator, *objects: dict[str, Any]) -> None:
    for obj in objects:
        emulator.apply(obj)


def configmap(name: str, labels: dict[str, str] | None = None, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def test_a_failing_validation_refuses_the_create_with_the_apiserver_message(
    kube_emulator: RunningEmulator,
) -> None:
    install(
        kube_emulator,
        policy(
            "labelled",
            [
                {
                    "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
                    "message": "needs a team",
                }
            ],
        ),
        binding("labelled-everywhere", "labelled"),
    )
    status, _, body = kube_emulator.request("POST", CONFIGMAPS, body=configmap("bare"))
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        "configmaps \"bare\" is forbidden: ValidatingAdmissionPolicy 'labelled' with binding "
        "'labelled-everywhere' denied request: needs a team"
    )
    assert kube_emulator.request("GET", f"{CONFIGMAPS}/bare")[0] == 404
    status, _, _ = kube_emulator.request("POST", CONFIGMAPS, body=configmap("owned", {"team": "a"}))
    assert status == 201


def test_reason_forbidden_answers_403_and_message_expression_wins(kube_emulator: RunningEmulator) -> None:
    install(
        kube_emulator,
        policy(
            "named",
            [
                {
                    "expression": "object.metadata.name.startsWith('ok-')",
                    "message": "static",
                    "messageExpression": "'name ' + object.metadata.name + ' lacks the prefix'",
                    "reason": "Forbidden",
                }
            ],
        ),
        binding("named", "named"),
    )
    status, _, body = kube_emulator.request("POST", CONFIGMAPS, body=configmap("bad"))
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"].endswith("denied request: name bad lacks the prefix")


def test_update_and_delete_see_the_old_object_and_delete_has_no_object(
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.apply(configmap("locked", {"protected": "true"}))
    kube_emulator.apply(configmap("free"))
    install(
        kube_emulator,
        policy(
            "protect",
            [
                {
                    "expression": "oldObject == null || !has(oldObject.metadata.labels) "
                    "|| !('protected' in oldObject.metadata.labels)",
                    "message": "protected",
                },
                {
                    "expression": "request.operation != 'DELETE' || object == null",
                    "message": "object on delete",
                },
                {
                    "expression": "request.operation != 'CREATE' || oldObject == null",
                    "message": "old on create",
                },
            ],
        ),
        binding("protect", "protect"),
    )
    patch = {"metadata": {"labels": {"protected": None}}}
    status, _, body = kube_emulator.request("PATCH", f"{CONFIGMAPS}/locked", body=patch, content_type=MERGE)
    assert status == 422
    assert body["message"].endswith("denied request: protected")
    status, _, body = kube_emulator.request("DELETE", f"{CONFIGMAPS}/locked")
    assert status == 422
    assert body["message"].endswith("denied request: protected")
    assert kube_emulator.request("GET", f"{CONFIGMAPS}/locked")[2]["metadata"]["labels"] == {
        "protected": "true"
    }
    assert kube_emulator.request("DELETE", f"{CONFIGMAPS}/free")[0] == 200
    assert kube_emulator.request("POST", CONFIGMAPS, body=configmap("new"))[0] == 201


def test_a_pod_bound_token_carries_its_node_in_user_info_extra(kube_emulator: RunningEmulator) -> None:
    emulator = kube_emulator
    for node in ("node-a", "node-b"):
        emulator.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    emulator.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent", "namespace": "default"}}
    )
    pod = emulator.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "agent-1", "namespace": "default"},
            "spec": {
                "nodeName": "node-a",
                "serviceAccountName": "agent",
                "containers": [{"name": "c", "image": "i"}],
            },
        }
    )
    emulator.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "agent-admin"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "default"}],
        }
    )
    install(
        emulator,
        policy(
            "own-node",
            [
                {
                    "expression": "object.metadata.name == variables.node",
                    "messageExpression": "'not ' + variables.node",
                }
            ],
            resources=("nodes",),
            operations=("UPDATE",),
            matchConditions=[
                {
                    "name": "agent",
                    "expression": "request.userInfo.username == 'system:serviceaccount:default:agent'",
                }
            ],
            variables=[
                {
                    "name": "node",
                    "expression": "'authentication.kubernetes.io/node-name' in request.userInfo.extra"
                    " ? request.userInfo.extra['authentication.kubernetes.io/node-name'][0] : ''",
                }
            ],
        ),
        binding("own-node", "own-node"),
    )
    status, _, minted = emulator.request(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/agent/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "boundObjectRef": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "name": "agent-1",
                    "uid": pod["metadata"]["uid"],
                }
            },
        },
    )
    assert status == 201
    token = minted["status"]["token"]
    status, _, review = emulator.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        token=token,
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    extra = review["status"]["userInfo"]["extra"]
    assert extra["authentication.kubernetes.io/node-name"] == ["node-a"]
    assert extra["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
    patch = {"metadata": {"labels": {"seen": "yes"}}}
    assert emulator.request("PATCH", f"{NODES}/node-a", body=patch, token=token, content_type=MERGE)[0] == 200
    status, _, body = emulator.request(
        "PATCH", f"{NODES}/node-b", body=patch, token=token, content_type=MERGE
    )
    assert status == 422
    assert body["message"].endswith("denied request: not node-a")
    # The superuser does not match the policy's matchConditions.
    assert emulator.request("PATCH", f"{NODES}/node-b", body=patch, content_type=MERGE)[0] == 200


def test_token_request_bound_to_another_pods_uid_is_refused(kube_emulator: RunningEmulator) -> None:
    kube_emulator.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent", "namespace": "default"}}
    )
    kube_emulator.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "agent-1", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    status, _, _ = kube_emulator.request(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/agent/token",
        body={"spec": {"boundObjectRef": {"kind": "Pod", "name": "agent-1", "uid": "not-its-uid"}}},
    )
    assert status == 409


def test_namespace_selector_and_namespace_object(kube_emulator: RunningEmulator) -> None:
    for name, labels in (("guarded", {"guard": "on"}), ("open", {})):
        kube_emulator.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
    install(
        kube_emulator,
        policy(
            "in-guarded",
            [{"expression": "namespaceObject.metadata.name == 'nowhere'", "message": "in ' + ns"}],
            matchConstraints={"namespaceSelector": {"matchLabels": {"guard": "on"}}},
        ),
        binding("in-guarded", "in-guarded"),
    )
    status, _, body = kube_emulator.request(
        "POST", "/api/v1/namespaces/guarded/configmaps", body=configmap("x", namespace="guarded")
    )
    assert status == 422
    assert body["message"].endswith("denied request: in ' + ns")
    assert (
        kube_emulator.request(
            "POST", "/api/v1/namespaces/open/configmaps", body=configmap("x", namespace="open")
        )[0]
        == 201
    )


def test_binding_match_resources_and_excluded_rules_narrow_the_policy(kube_emulator: RunningEmulator) -> None:
    install(
        kube_emulator,
        policy(
            "never",
            [{"expression": "false", "message": "no"}],
            matchConstraints={
                "excludeResourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["*"],
                        "resources": ["configmaps"],
                        "resourceNames": ["spared"],
                    }
                ]
            },
        ),
        binding(
            "never-selected", "never", matchResources={"objectSelector": {"matchLabels": {"strict": "yes"}}}
        ),
    )
    assert kube_emulator.request("POST", CONFIGMAPS, body=configmap("plain"))[0] == 201
    assert kube_emulator.request("POST", CONFIGMAPS, body=configmap("spared", {"strict": "yes"}))[0] == 201
    status, _, body = kube_emulator.request("POST", CONFIGMAPS, body=configmap("caught", {"strict": "yes"}))
    assert status == 422
    assert "with binding 'never-selected' denied request: no" in body["message"]
    # A Secret is not in the policy's rules at all.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"strict": "yes"}}}
    assert kube_emulator.request("POST", "/api/v1/namespaces/default/secrets", body=secret)[0] == 201


@pytest.mark.parametrize(("failure_policy", "expected"), [("Fail", 422), ("Ignore", 201)])
def test_an_expression_that_errors_follows_the_failure_policy(
    kube_emulator: RunningEmulator, failure_policy: str, expected: int
) -> None:
    install(
        kube_emulator,
        policy("broken", [{"expression": "object.spec.missing == 1"}], failurePolicy=failure_policy),
        binding("broken", "broken"),
    )
    status, _, body = kube_emulator.request("POST", CONFIGMAPS, body=configmap("c"))
    assert status == expected
    if expected == 422:
        assert "denied request: expression 'object.spec.missing == 1' resulted in error" in body["message"]


def test_without_message_the_expression_is_named_and_warn_only_bindings_allow(
    kube_emulator: RunningEmulator,
) -> None:
    install(
        kube_emulator,
        policy("strict", [{"expression": "object.metadata.name != 'c'"}]),
        binding("strict-warn", "strict", actions=("Warn", "Audit")),
    )
    assert kube_emulator.request("POST", CONFIGMAPS, body=configmap("c"))[0] == 201
    kube_emulator.apply(binding("strict-deny", "strict"))
    status, _, body = kube_emulator.request(
        "PUT", f"{CONFIGMAPS}/c", body=configmap("c") | {"data": {"k": "w"}}
    )
    assert status == 422
    assert body["message"].endswith("denied request: failed expression: object.metadata.name != 'c'")


def test_identities_made_in_process_carry_extra_into_policies(kube_emulator: RunningEmulator) -> None:
    agent = kube_emulator.add_identity(
        Identity.pod_bound("default", "agent", pod="p", pod_uid="u-1", node="node-z")
    )
    install(
        kube_emulator,
        policy(
            "who",
            [
                {
                    "expression": "request.userInfo.extra['authentication.kubernetes.io/pod-name'] == ['p']",
                    "message": "wrong pod",
                },
                {"expression": "'system:serviceaccounts' in request.userInfo.groups", "message": "groups"},
            ],
        ),
        binding("who", "who", matchResources={"objectSelector": {"matchLabels": {"check": "me"}}}),
    )
    kube_emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "agent-admin"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "default"}],
        }
    )
    assert (
        kube_emulator.request("POST", CONFIGMAPS, body=configmap("a", {"check": "me"}), identity=agent)[0]
        == 201
    )
    status, _, body = kube_emulator.request("POST", CONFIGMAPS, body=configmap("b", {"check": "me"}))
    # The superuser's token has no extra: the lookup fails, and failurePolicy Fail refuses.
    assert status == 422
    assert "pod-name'] == ['p']' resulted in error" in body["message"]
