"""What workload delivery may do, asked of the emulator's RBAC authorizer (the upstream rules) over
the rendered roles and bindings of the controller's ServiceAccount, per delivery mode (D93).

Both modes: read and patch the four workload kinds and patch Pods (the scheduling gate) in any
namespace, never create or delete them; delete a Deployment's stale ReplicaSet (D95). SharedPVC
mode only: making shared claims, their volumes, the materialize Jobs and the Secrets beside them.
NodeCache mode only: read the Nodes (placement by the plugin's readiness label and cache report).
Both modes take back the shared claims a workload no longer uses (D100): in NodeCache mode those
an earlier SharedPVC delivery made (follow, mark, delete; never make one).
"""

from __future__ import annotations

from functools import cache

import pytest

from kubeemu.authz import Attributes
from kubeemu.cluster import Cluster
from support.render import RenderedChart
from support.scenarios import scenario

CONTROLLER = "system:serviceaccount:d8-ai-models:controller"
GROUPS = ("system:serviceaccounts", "system:serviceaccounts:d8-ai-models", "system:authenticated")
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
USER_NAMESPACE = "team-a"
MODES = {"SharedPVC": "minimal", "NodeCache": "delivery-node-cache"}

WORKLOADS = [("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "cronjobs")]
# (group, resource, verb) granted in a user namespace in SharedPVC mode, also cluster-wide.
WORKLOAD_RULES = [
    *((group, resource, verb) for group, resource in WORKLOADS for verb in ("get", "list", "watch", "patch")),
    ("", "pods", "list"),
    ("", "pods", "patch"),
    # The stale ReplicaSet a gated Deployment's first template left (D95).
    ("apps", "replicasets", "list"),
    ("apps", "replicasets", "delete"),
]
# Both modes: the shared claims are followed, marked and, a grace period after their workload
# stopped using them, deleted (D100); in NodeCache mode those of an earlier SharedPVC delivery.
CLAIM_CLEANUP = [
    *(("", "persistentvolumeclaims", verb) for verb in ("list", "watch", "patch", "delete")),
    # The orphan pass lists what can mount a claim, Jobs among them (D152).
    ("batch", "jobs", "list"),
]
SHARED_PVC_ONLY = [
    # Made and read by name only where SharedPVC delivers.
    *(("", "persistentvolumeclaims", verb) for verb in ("get", "create")),
    *(("batch", "jobs", verb) for verb in ("get", "watch", "create", "delete")),
    *(("", "secrets", verb) for verb in ("create", "update")),
]
SHARED_PVC_ONLY_CLUSTER = [("", "persistentvolumes", verb) for verb in ("get", "list", "watch")]
# Never, in any mode: what delivery has no business doing.
NEVER = [
    *((group, resource, verb) for group, resource in WORKLOADS for verb in ("create", "update", "delete")),
    ("", "pods", "create"),
    ("", "pods", "delete"),
    ("", "pods", "update"),
    ("", "persistentvolumeclaims", "update"),
    ("", "secrets", "list"),
    ("", "secrets", "watch"),
    ("", "secrets", "patch"),
    ("", "secrets", "delete"),
    ("batch", "jobs", "update"),
    ("batch", "jobs", "patch"),
    ("apps", "replicasets", "create"),
    ("apps", "replicasets", "update"),
    ("apps", "replicasets", "patch"),
]


@cache
def authorizer(mode: str) -> Cluster:
    chart: RenderedChart = scenario(MODES[mode]).render()
    cluster = Cluster()
    cluster.apply(chart.get("Namespace", "d8-ai-models"))
    for kind in RBAC_KINDS:
        for obj in chart.of_kind(kind):
            cluster.apply(obj)
    return cluster


def allowed(mode: str, group: str, resource: str, verb: str, namespace: str = USER_NAMESPACE) -> bool:
    attrs = Attributes(
        user=CONTROLLER, groups=GROUPS, verb=verb, namespace=namespace, api_group=group, resource=resource
    )
    return authorizer(mode).authz.authorize(attrs).allowed


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("group", "resource", "verb"), WORKLOAD_RULES)
def test_delivery_reads_and_patches_workloads_and_pods_everywhere_in_both_modes(
    mode: str, group: str, resource: str, verb: str
) -> None:
    assert allowed(mode, group, resource, verb)
    assert allowed(mode, group, resource, verb, namespace="")  # the informers list all namespaces


@pytest.mark.parametrize("verb", ["get", "list", "watch"])
def test_nodes_are_read_only_in_node_cache_mode(verb: str) -> None:
    assert allowed("NodeCache", "", "nodes", verb, namespace="")
    assert not allowed("SharedPVC", "", "nodes", verb, namespace="")
    for write in ("create", "update", "patch", "delete"):
        assert not allowed("NodeCache", "", "nodes", write, namespace="")


@pytest.mark.parametrize(("group", "resource", "verb"), SHARED_PVC_ONLY)
def test_claims_are_made_and_jobs_and_their_secrets_only_in_shared_pvc_mode(
    group: str, resource: str, verb: str
) -> None:
    assert allowed("SharedPVC", group, resource, verb)
    assert not allowed("NodeCache", group, resource, verb)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("group", "resource", "verb"), CLAIM_CLEANUP)
def test_shared_claims_are_taken_back_in_both_modes(mode: str, group: str, resource: str, verb: str) -> None:
    assert allowed(mode, group, resource, verb)
    assert allowed(mode, group, resource, verb, namespace="")  # the informer lists all namespaces


@pytest.mark.parametrize(("group", "resource", "verb"), SHARED_PVC_ONLY_CLUSTER)
def test_volumes_are_read_only_in_shared_pvc_mode(group: str, resource: str, verb: str) -> None:
    assert allowed("SharedPVC", group, resource, verb, namespace="")
    assert not allowed("NodeCache", group, resource, verb, namespace="")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("group", "resource", "verb"), NEVER)
def test_delivery_never_gets_more(mode: str, group: str, resource: str, verb: str) -> None:
    assert not allowed(mode, group, resource, verb)
    for verb_ in ("create", "update", "patch", "delete"):
        assert not allowed(mode, "", "persistentvolumes", verb_, namespace="")
