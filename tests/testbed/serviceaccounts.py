"""kube-controller-manager's ServiceAccount controller, the part pods depend on: every Namespace
has a ServiceAccount `default` (created when the Namespace appears, re-created when deleted), so a
Pod that names no ServiceAccount (a materialize Job's, a user's Deployment's) is admitted as on a
cluster."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubeemu import errors
from kubeemu.store import WatchEvent
from testbed.jobrunner import Emulator
from testbed.reactor import StoreReactor, key_of, meta

DEFAULT_ACCOUNT = "default"


class ServiceAccounts(StoreReactor):
    name = "serviceaccounts"

    def __init__(self, emulator: Emulator) -> None:
        super().__init__(emulator.cluster, watched=[("", "v1", "namespaces"), ("", "v1", "serviceaccounts")])
        self.start()

    def keys_for(self, kind: str, event: WatchEvent) -> Iterable[Hashable]:
        if kind == "namespaces":
            return [] if event.type == "DELETED" else [key_of(event.obj)[1]]
        namespace, name = key_of(event.obj)
        return [namespace] if name == DEFAULT_ACCOUNT and event.type == "DELETED" else []

    def reconcile(self, key: Any) -> None:
        namespace = str(key)
        found = self.get("namespaces", "", namespace)
        if found is None or meta(found).get("deletionTimestamp"):
            return
        if self.get("serviceaccounts", namespace, DEFAULT_ACCOUNT) is not None:
            return
        try:
            self.cluster.create(
                self.rtype("serviceaccounts"),
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": DEFAULT_ACCOUNT, "namespace": namespace},
                },
                namespace=namespace,
            )
        except errors.APIError as error:
            if error.code != 409:
                raise
