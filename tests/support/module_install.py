"""Install the module's rendered RBAC into the API emulator, as Helm would in a cluster.

Components then authenticate as their own ServiceAccounts, so every cluster test (and the local
stack) also proves the chart's least-privilege RBAC is enough: the emulator refuses anything
beyond it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kubeemu.authn import Identity
from kubeemu.cluster import Cluster
from kubeemu.pytest_fixtures import RunningEmulator
from support.render import RenderedChart, render_chart
from support.values import module_values

# Applied in this order so bindings find their namespace and roles.
INSTALLED_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
MODULE_NAMESPACE = "d8-ai-models"


def install_rbac(cluster: Cluster, chart: RenderedChart) -> dict[str, Identity]:
    """Apply the chart's namespaces and RBAC; return a token identity per rendered ServiceAccount."""
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


@dataclasses.dataclass(frozen=True)
class InstalledModule:
    emulator: RunningEmulator
    service_accounts: dict[str, Identity]

    def kubeconfig(self, service_account: str) -> Path:
        """A kubeconfig that authenticates as the component's ServiceAccount."""
        return self.emulator.kubeconfig(self.service_accounts[service_account])


def install_module(emulator: RunningEmulator, *, rendered: RenderedChart | None = None) -> InstalledModule:
    chart = rendered if rendered is not None else render_chart(module_values())
    accounts = install_rbac(emulator.cluster, chart)
    for identity in accounts.values():
        emulator.add_identity(identity)
    return InstalledModule(emulator=emulator, service_accounts=accounts)
