"""The ValidatingAdmissionPolicies of the chart (issue 24, D161), rendered and then applied to the
emulator, which evaluates them as the apiserver does: the controller writes only the module's own
Secrets, the node plugin writes only its own Node's readiness label and cache report. The real
writers (the publication token Secret, the node reporter's patch) still pass under them."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from ai_models.adapters.kube.jobs import Jobs
from ai_models.adapters.kube.secrets import Secrets
from ai_models.controller.models.jobs import TOKEN_KEY, token_secret
from ai_models.domain.delivery.node_cache import CacheReport
from ai_models.domain.storage.ledger import Owner
from ai_models.names import (
    HERITAGE,
    HERITAGE_LABEL,
    MODULE,
    MODULE_LABEL,
    MODULE_NAMESPACE,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_REPORT_ANNOTATION,
)
from ai_models.nodecache.report import NodeReporter
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator
from support.render import RenderedChart
from support.scenarios import scenario

POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
MERGE = "application/merge-patch+json"
CONTROLLER_POLICY = f"{MODULE}-controller-secrets"
NODE_POLICY = f"{MODULE}-node-cache-nodes"
OWN = {MODULE_LABEL: MODULE, HERITAGE_LABEL: HERITAGE}


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def policies(name: str) -> list[dict[str, Any]]:
    return [obj for obj in rendered(name).objects if obj.get("kind") in POLICY_KINDS]


def test_the_controller_policy_renders_in_both_modes_and_the_node_policy_only_with_node_cache() -> None:
    for name in ("minimal", "delivery-node-cache"):
        names = {obj["metadata"]["name"] for obj in policies(name)}
        assert CONTROLLER_POLICY in names
    assert NODE_POLICY not in {obj["metadata"]["name"] for obj in policies("minimal")}
    assert NODE_POLICY in {obj["metadata"]["name"] for obj in policies("delivery-node-cache")}
    for obj in policies("delivery-node-cache"):
        if obj["kind"] == "ValidatingAdmissionPolicy":
            assert obj["spec"]["failurePolicy"] == "Fail"
            assert obj["spec"]["validations"]
        else:
            assert obj["spec"]["validationActions"] == ["Deny"]
            assert obj["spec"]["policyName"] == obj["metadata"]["name"]


def test_the_node_policy_names_the_keys_of_names_py() -> None:
    (policy,) = [
        obj
        for obj in policies("delivery-node-cache")
        if obj["kind"] == "ValidatingAdmissionPolicy" and obj["metadata"]["name"] == NODE_POLICY
    ]
    text = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert f"'{NODE_CACHE_READY_LABEL}'" in text
    assert f"'{NODE_CACHE_REPORT_ANNOTATION}'" in text


@pytest.fixture
def cluster(kube_emulator: RunningEmulator) -> RunningEmulator:
    """The emulator with the module namespace, the module's identities bound to cluster-admin (RBAC
    is not what is proven here) and the rendered policies applied."""
    emulator = kube_emulator
    emulator.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODULE_NAMESPACE}})
    emulator.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for account in ("controller", "node-cache"):
        emulator.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": MODULE_NAMESPACE},
            }
        )
        emulator.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"test-{account}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": MODULE_NAMESPACE}],
            }
        )
    for node in ("node-a", "node-b"):
        emulator.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"zone": "z1"}, "annotations": {"note": "kept"}},
                "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
            }
        )
    for obj in policies("delivery-node-cache"):
        emulator.apply(obj)
    return emulator


def secret(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": {"k": "dg=="}}


def controller(emulator: RunningEmulator) -> Identity:
    return emulator.add_identity(Identity.service_account(MODULE_NAMESPACE, "controller"))


def node_plugin(emulator: RunningEmulator, node: str) -> Identity:
    return emulator.add_identity(
        Identity.pod_bound(
            MODULE_NAMESPACE, "node-cache", pod=f"plugin-{node}", pod_uid=f"uid-{node}", node=node
        )
    )


def test_the_controller_cannot_create_a_secret_without_the_module_label(cluster: RunningEmulator) -> None:
    who = controller(cluster)
    status, _, body = cluster.request(
        "POST", "/api/v1/namespaces/team/secrets", body=secret("stray", "team"), identity=who
    )
    assert status == 403, body
    assert f"ValidatingAdmissionPolicy '{CONTROLLER_POLICY}'" in body["message"]
    assert "writes only Secrets labelled module=ai-models" in body["message"]
    status, _, body = cluster.request(
        "POST", "/api/v1/namespaces/team/secrets", body=secret("own", "team", OWN), identity=who
    )
    assert status == 201, body["message"]


def test_the_controller_cannot_update_or_delete_a_users_secret(cluster: RunningEmulator) -> None:
    cluster.apply(secret("users", "team"))
    who = controller(cluster)
    item = "/api/v1/namespaces/team/secrets/users"
    relabel = {"metadata": {"labels": OWN}, "data": {"k": "eA=="}}
    status, _, body = cluster.request("PATCH", item, body=relabel, identity=who, content_type=MERGE)
    assert status == 403
    assert "may not change or delete a Secret it did not create" in body["message"]
    status, _, body = cluster.request("PUT", item, body=secret("users", "team", OWN), identity=who)
    assert status == 403
    status, _, _ = cluster.request("DELETE", item, identity=who)
    assert status == 403
    stored = cluster.request("GET", item)[2]
    assert stored["data"] == {"k": "dg=="}
    assert "labels" not in stored["metadata"]
    # Other identities are not the policy's business.
    assert cluster.request("PATCH", item, body=relabel, content_type=MERGE)[0] == 200


def test_the_controller_still_writes_its_own_secrets(cluster: RunningEmulator) -> None:
    """The publication token Secret, through the adapter the controller uses (create, then
    replace an earlier attempt's), and the Job beside it; then the delete with the Job."""
    client = cluster.api_client(controller(cluster))
    owner = Owner(kind="Model", namespace="team", name="m", uid="0000-1111")
    made = token_secret(owner, namespace=MODULE_NAMESPACE, token="first")
    jobs = Jobs(client, namespace=MODULE_NAMESPACE)
    Secrets(client).put(made)
    Secrets(client).put(token_secret(owner, namespace=MODULE_NAMESPACE, token="second"))
    name = made["metadata"]["name"]
    stored = Secrets(client).read(MODULE_NAMESPACE, name)
    assert stored is not None
    assert stored.text(TOKEN_KEY) == "second"
    jobs.delete("no-such-job", secret_name=name)
    assert Secrets(client).read(MODULE_NAMESPACE, name) is None


def test_the_node_plugin_patches_its_own_nodes_module_keys(cluster: RunningEmulator) -> None:
    client = cluster.api_client(node_plugin(cluster, "node-a"))

    class Usable:
        def report(self) -> CacheReport:
            return CacheReport(limit_bytes=10, used_bytes=1, available_bytes=9, ready_digests=())

        def usable(self) -> bool:
            return True

    assert NodeReporter(cache=Usable(), api_client=client, node_name="node-a").publish()
    node = cluster.request("GET", "/api/v1/nodes/node-a")[2]
    assert node["metadata"]["labels"][NODE_CACHE_READY_LABEL] == "true"
    assert NODE_CACHE_REPORT_ANNOTATION in node["metadata"]["annotations"]
    assert not NodeReporter(cache=Usable(), api_client=client, node_name="node-b").publish()
    assert (
        NODE_CACHE_READY_LABEL not in cluster.request("GET", "/api/v1/nodes/node-b")[2]["metadata"]["labels"]
    )


@pytest.mark.parametrize(
    ("patch", "refusal"),
    [
        ({"metadata": {"labels": {"zone": "z2"}}}, "only the label"),
        ({"metadata": {"labels": {"zone": None}}}, "only the label"),
        ({"metadata": {"labels": {"node-role.kubernetes.io/gpu": ""}}}, "only the label"),
        ({"metadata": {"annotations": {"note": "changed"}}}, "only the annotation"),
        ({"spec": {"taints": None}}, "may not change the spec"),
        ({"spec": {"unschedulable": True}}, "may not change the spec"),
        ({"metadata": {"finalizers": ["x/y"]}}, "finalizers"),
    ],
)
def test_the_node_plugin_cannot_change_anything_else_of_its_own_node(
    cluster: RunningEmulator, patch: dict[str, Any], refusal: str
) -> None:
    who = node_plugin(cluster, "node-a")
    status, _, body = cluster.request(
        "PATCH", "/api/v1/nodes/node-a", body=patch, identity=who, content_type=MERGE
    )
    assert status == 403
    assert refusal in body["message"]


def test_the_node_plugin_cannot_patch_another_node_or_write_without_a_pod_bound_token(
    cluster: RunningEmulator,
) -> None:
    own = {"metadata": {"labels": {NODE_CACHE_READY_LABEL: "true"}}}
    who = node_plugin(cluster, "node-a")
    status, _, body = cluster.request(
        "PATCH", "/api/v1/nodes/node-b", body=own, identity=who, content_type=MERGE
    )
    assert status == 403
    assert "only the Node its pod runs on (node-a), not node-b" in body["message"]
    unbound = cluster.add_identity(Identity.service_account(MODULE_NAMESPACE, "node-cache"))
    status, _, body = cluster.request(
        "PATCH", "/api/v1/nodes/node-a", body=own, identity=unbound, content_type=MERGE
    )
    assert status == 403
    assert "its token is not bound to a pod" in body["message"]
    status, _, _ = cluster.request("DELETE", "/api/v1/nodes/node-a", identity=who)
    assert status == 403
