"""Install the module's rendered RBAC and admission policies into the API emulator, as Helm would
in a cluster.

Components then authenticate as their own ServiceAccounts, so every cluster test (and the local
stack) also proves the chart's least privilege is enough: the emulator refuses anything beyond its
RBAC and whatever its ValidatingAdmissionPolicies deny (D161).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kubeemu.authn import Identity
from kubeemu.cluster import Cluster
from kubeemu.pytest_fixtures import RunningEmulator
from support.render import RenderedChart, render_chart
from support.values import module_values

# Applied in this order so bindings find their namespace, roles and policies.
INSTALLED_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "Role",
    "ClusterRoleBinding",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)
MODULE_NAMESPACE = "d8-ai-models"


def install_rbac(cluster: Cluster, chart: RenderedChart) -> dict[str, Identity]:
    """Apply the chart's namespaces, RBAC and admission policies; return a token identity per
    rendered ServiceAccount."""
    for kind in INSTALLED_KINDS:
        for obj in chart.of_kind(kind):
            namespace = obj["metadata"].get("namespace")
            if namespace and namespace != MODULE_NAMESPACE:
                # Objects the module puts into other namespaces (d8-monitoring) need those to exist.
                cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            cluster.apply(obj)
    accounts: dict[str, Identity] = {}
    for account in chart.of_kind("ServiceAccount"):
        meta = account["metadata"]
        identity = Identity.service_account(meta["namespace"], meta["name"])
        cluster.authn.add(identity)
        accounts[meta["name"]] = identity
    return accounts


def pod_bound(cluster: Cluster, account: Identity, *, node: str) -> Identity:
    """A token of the ServiceAccount `account` bound to a pod of it on `node` (what kubelet mounts
    in a pod since Kubernetes 1.22): the node-name claim is what the node plugin's policy checks."""
    ref = account.service_account_ref
    assert ref is not None, account
    namespace, name = ref
    identity = Identity.pod_bound(
        namespace, name, pod=f"{name}-{node}", pod_uid=f"{name}-{node}-uid", node=node
    )
    cluster.authn.add(identity)
    return identity


@dataclasses.dataclass(frozen=True)
class InstalledModule:
    emulator: RunningEmulator
    service_accounts: dict[str, Identity]

    def kubeconfig(self, service_account: str) -> Path:
        """A kubeconfig that authenticates as the component's ServiceAccount."""
        return self.emulator.kubeconfig(self.service_accounts[service_account])

    def pod_kubeconfig(self, service_account: str, *, node: str) -> Path:
        """A kubeconfig with the token a pod of the component's ServiceAccount on `node` has."""
        return self.emulator.kubeconfig(
            pod_bound(self.emulator.cluster, self.service_accounts[service_account], node=node)
        )


def install_module(emulator: RunningEmulator, *, rendered: RenderedChart | None = None) -> InstalledModule:
    chart = rendered if rendered is not None else render_chart(module_values())
    accounts = install_rbac(emulator.cluster, chart)
    for identity in accounts.values():
        emulator.add_identity(identity)
    return InstalledModule(emulator=emulator, service_accounts=accounts)
