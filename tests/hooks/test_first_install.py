"""The first install in the order addon-operator and Helm follow, against the API emulator (D121).

A module's hooks run (Synchronization, then beforeHelm) before Helm applies the chart, so the
module namespace does not exist yet; the emulator, like the API server, answers a write there with
404. Here shell-operator's part is played over the emulator's objects: each binding's snapshot is
its real jqFilter (libjq) over the objects it selects, and the hook's Kubernetes operations are
applied to the emulator, so a write into the missing namespace fails the run as it would in a
cluster. Then Helm creates the namespace from the rendered chart, its Added event runs the hook,
and a normal run follows.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import jq  # type: ignore[import-not-found]
import pytest
from deckhouse import hook

from ai_models.names import ARTIFACTS_CA_SECRET, ARTIFACTS_CREDENTIALS_SECRET, MODULE_NAMESPACE
from kubeemu.cluster import Cluster
from kubeemu.errors import APIError
from support.render import render_chart
from support.values import MINIMAL_SETTINGS, module_values

HOOK = "artifacts_credentials"
ACCESS = base64.b64encode(b"AKIA-first-install").decode()
SECRET = base64.b64encode(b"first-install-secret").decode()
CA_PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def values() -> dict[str, Any]:
    artifacts = {**MINIMAL_SETTINGS["artifacts"], "credentialsSecretName": "s3", "caSecretName": "s3-ca"}
    return module_values({**MINIMAL_SETTINGS, "artifacts": artifacts})


def cluster_with_sources() -> Cluster:
    cluster = Cluster()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d8-system"}})
    for name, data in (("s3", {"accessKey": ACCESS, "secretKey": SECRET}), ("s3-ca", {"ca.crt": CA_PEM})):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": "d8-system"},
                "data": data,
            }
        )
    return cluster


def bindings(kit: Any) -> list[dict[str, Any]]:
    config: dict[str, Any] = json.loads(kit.load(HOOK).config)
    return list(config["kubernetes"])


def selected(cluster: Cluster, binding: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects shell-operator delivers to the binding (kind, namespace and name selectors)."""
    rtype = cluster.resource_for(binding["apiVersion"], binding["kind"])
    stored, _ = cluster.store.list_objects(rtype.storage_key, None)
    namespaces = ((binding.get("namespace") or {}).get("nameSelector") or {}).get("matchNames")
    names = (binding.get("nameSelector") or {}).get("matchNames")
    found = []
    for obj in (cluster.served(rtype, item) for item in stored):
        meta = obj["metadata"]
        if namespaces is not None and meta.get("namespace") not in namespaces:
            continue
        if names is not None and meta["name"] not in names:
            continue
        if binding.get("labelSelector") and (meta.get("labels") or {}).get("owner") == "helm":
            continue  # the source binding's only selector: owner NotIn [helm]
        found.append(obj)
    return found


def snapshots(kit: Any, cluster: Cluster) -> dict[str, list[dict[str, Any]]]:
    return {
        binding["name"]: [
            {"filterResult": jq.compile(binding["jqFilter"]).input_value(obj).first()}
            for obj in selected(cluster, binding)
        ]
        for binding in bindings(kit)
    }


def run_and_apply(kit: Any, cluster: Cluster, context: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the hook on one binding context and apply its operations, as addon-operator does; an
    operation the API refuses raises, failing the run."""
    output = hook.testrun(kit.load(HOOK).main, binding_context=[context], initial_values=values())
    operations: list[dict[str, Any]] = kit.kube(output)
    for operation in operations:
        if operation["operation"] == "CreateOrUpdate":
            cluster.apply(operation["object"])
        elif operation["operation"] == "Delete":
            rtype = cluster.resource_for(operation["apiVersion"], operation["kind"])
            cluster.delete(rtype, namespace=operation["namespace"], name=operation["name"])
        else:
            pytest.fail(f"unexpected operation {operation['operation']}")
    return operations


def copies(cluster: Cluster) -> dict[str, dict[str, str]]:
    rtype = cluster.resource_for("v1", "Secret")
    stored, _ = cluster.store.list_objects(rtype.storage_key, MODULE_NAMESPACE)
    return {item["metadata"]["name"]: dict(item.get("data") or {}) for item in stored}


def test_a_write_before_the_namespace_exists_is_refused_by_the_emulator() -> None:
    """The trap this file guards against is real in the test bed: a Secret in a namespace that
    does not exist yet gets 404."""
    with pytest.raises(APIError, match="not found"):
        cluster_with_sources().apply(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": MODULE_NAMESPACE}}
        )


def test_first_install_then_the_namespace_added_event_then_a_normal_run(kit: Any) -> None:
    cluster = cluster_with_sources()
    # 1. Deckhouse starts the module: Synchronization of every binding, then beforeHelm.
    snaps = snapshots(kit, cluster)
    assert snaps["module_namespace"] == []
    first = [
        *(
            {
                "binding": binding["name"],
                "type": "Synchronization",
                "objects": snaps[binding["name"]],
                "snapshots": snaps,
            }
            for binding in bindings(kit)
        ),
        {"binding": "beforeHelm", "snapshots": snaps},
    ]
    for context in first:
        assert run_and_apply(kit, cluster, context) == []
    # 2. Helm applies the chart: the namespace comes from templates/namespace.yaml.
    cluster.apply(render_chart(values()).get("Namespace", MODULE_NAMESPACE))
    snaps = snapshots(kit, cluster)
    added = snaps["module_namespace"][0]["filterResult"]
    assert added == {"name": MODULE_NAMESPACE, "terminating": False}
    context = {"binding": "module_namespace", "type": "Event", "watchEvent": "Added", "filterResult": added}
    assert len(run_and_apply(kit, cluster, {**context, "snapshots": snaps})) == 2
    assert copies(cluster) == {
        ARTIFACTS_CREDENTIALS_SECRET: {"accessKey": ACCESS, "secretKey": SECRET},
        ARTIFACTS_CA_SECRET: {"ca.crt": CA_PEM},
    }
    # 3. The next module run (beforeHelm) finds the copies in sync and writes nothing.
    assert run_and_apply(kit, cluster, {"binding": "beforeHelm", "snapshots": snapshots(kit, cluster)}) == []
