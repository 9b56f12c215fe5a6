"""The stale ReplicaSet of a Deployment admitted before its model was Ready: the delivery controller
(in the test process, on the emulator, with the test bed's Deployment controller) deletes it once the
complete template's ReplicaSet is available, and never anything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.domain.delivery.contract import WorkloadKind
from ai_models.domain.delivery.template import applied, gated
from ai_models.domain.models.reference import ModelKey
from ai_models.names import MODEL_ANNOTATION, DeliveryEvent, DeliveryReason, ModelKind
from fakes.served_artifacts import create_model, mark_ready, store_artifact
from support.eventually import eventually

NAMESPACE = "team-a"  # the conftest's
Stack = Any  # conftest.DeliveryStack
LLAMA = ModelKey(ModelKind.MODEL, NAMESPACE, "llama")
FILES = {"config.json": b'{"model_type": "llama"}', "model.safetensors": bytes(range(256)) * 64}
DELIVERY_SECONDS = 90
WEB = WorkloadKey(WorkloadKind.DEPLOYMENT, NAMESPACE, "web")


def users_deployment(*, annotated: bool, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
    }
    if node_selector:
        template["spec"]["nodeSelector"] = dict(node_selector)
    metadata: dict[str, Any] = {"name": "web", "namespace": NAMESPACE}
    if annotated:
        metadata["annotations"] = {MODEL_ANNOTATION: "llama"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


def admitted(stack: Stack, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the admission webhook lets it through (`verdict.admit`)."""
    result = copy.deepcopy(obj)
    template = stack.admitted_template(result, [LLAMA])
    if template is not None:
        result["spec"]["template"] = template
    return result


def first_replica_set(stack: Stack) -> str:
    names = sorted(replica_sets(stack))
    assert len(names) == 1, names
    return names[0]


def replica_sets(stack: Stack) -> dict[str, dict[str, Any]]:
    found = stack.items(f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets")
    return {item["metadata"]["name"]: item for item in found}


def pending_model(stack: Stack) -> Any:
    owner = create_model(stack.emulator, "llama", namespace=NAMESPACE)
    eventually(lambda: stack.model_of(LLAMA) is not None, message="the Model in the Model cache")
    return owner


def make_ready(stack: Stack, owner: Any) -> None:
    digest = store_artifact(stack.store, owner, FILES)
    mark_ready(stack.emulator, owner, digest, size=sum(len(data) for data in FILES.values()))


def delivered(stack: Stack) -> Callable[[], bool]:
    return lambda: stack.report("web")[0] == DeliveryReason.DELIVERED.value


def deletion_events(stack: Stack) -> list[dict[str, Any]]:
    return [
        event
        for event in stack.items(f"/api/v1/namespaces/{NAMESPACE}/events")
        if event.get("reason") == DeliveryEvent.STALE_REPLICA_SET_DELETED.value
        and (event.get("involvedObject") or {}).get("name") == "web"
    ]


def one_replica_set(stack: Stack, name: str) -> Callable[[], dict[str, Any]]:
    def check() -> dict[str, Any]:
        found = replica_sets(stack)
        assert len(found) == 1, sorted(found)
        assert name in found, sorted(found)
        return found[name]

    return check


def test_a_deployment_created_before_its_model_was_ready_ends_with_one_replica_set(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    owner = pending_model(stack)
    stack.emulator.apply(admitted(stack, users_deployment(annotated=True)))
    eventually(
        lambda: stack.report("web")[0] == DeliveryReason.MODEL_NOT_READY.value,
        timeout=DELIVERY_SECONDS,
        message=lambda: f"report: {stack.report('web')}",
    )
    gated_name = eventually(lambda: first_replica_set(stack), message="the gated ReplicaSet")
    assert gated(replica_sets(stack)[gated_name]["spec"]["template"])

    make_ready(stack, owner)
    eventually(delivered(stack), timeout=DELIVERY_SECONDS, message=lambda: f"report: {stack.report('web')}")
    template = stack.workload("web")["spec"]["template"]
    assert applied(template) is not None
    assert not gated(template)

    def current_name() -> str:
        names = [
            name
            for name, item in replica_sets(stack).items()
            if applied(item["spec"]["template"]) is not None
        ]
        assert len(names) == 1, names
        return names[0]

    current = eventually(current_name, timeout=DELIVERY_SECONDS, message="the complete template's ReplicaSet")
    remaining = eventually(
        one_replica_set(stack, current), timeout=DELIVERY_SECONDS, message="only the current ReplicaSet left"
    )
    assert int(remaining["status"].get("availableReplicas") or 0) == 1
    events = eventually(lambda: deletion_events(stack), message="an Event about the deleted ReplicaSet")
    assert len(events) == 1, events
    assert gated_name in events[0]["message"]
    assert current in events[0]["message"]

    def only_current_pods() -> bool:
        found = stack.items(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dweb")
        hashes = [(pod["metadata"].get("labels") or {}).get("pod-template-hash") for pod in found]
        assert hashes == [remaining["metadata"]["labels"]["pod-template-hash"]], hashes
        return True

    eventually(only_current_pods, message="the gated Pod gone with its ReplicaSet")


def test_a_users_own_earlier_replica_set_is_kept_and_nothing_goes_before_the_new_one_is_available(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    owner = pending_model(stack)
    # The user's Deployment first, without the annotation; its pods need a node labelled pool=gpu,
    # which the cluster does not have yet, so no ReplicaSet of it becomes available.
    gpu = {"pool": "gpu"}
    stack.emulator.apply(users_deployment(annotated=False, node_selector=gpu))
    users_name = eventually(lambda: first_replica_set(stack), message="the user's ReplicaSet")
    # Then the annotation, while the model is not Ready: admitted gated.
    stack.emulator.apply(admitted(stack, users_deployment(annotated=True, node_selector=gpu)))

    def gated_name() -> str:
        names = [name for name, item in replica_sets(stack).items() if gated(item["spec"]["template"])]
        assert len(names) == 1, sorted(replica_sets(stack))
        return names[0]

    stale = eventually(gated_name, message="the gated-only ReplicaSet")

    make_ready(stack, owner)
    eventually(delivered(stack), timeout=DELIVERY_SECONDS, message=lambda: f"report: {stack.report('web')}")

    def complete_name() -> str:
        names = [
            name
            for name, item in replica_sets(stack).items()
            if applied(item["spec"]["template"]) is not None
        ]
        assert len(names) == 1, sorted(replica_sets(stack))
        return names[0]

    current = eventually(
        complete_name, timeout=DELIVERY_SECONDS, message="the complete template's ReplicaSet"
    )
    eventually(
        lambda: applied((stack.runtime.informers.workload(WEB) or {})["spec"]["template"]) is not None,
        message="the delivered template in the controller's cache",
    )
    # A whole pass of the controller over this very state (the new ReplicaSet exists, its pods are
    # unschedulable): it is Delivered and deletes nothing.
    stack.runtime.reconciler.reconcile(WEB)
    assert stack.report("web")[0] == DeliveryReason.DELIVERED.value
    assert set(replica_sets(stack)) == {users_name, stale, current}
    assert int(replica_sets(stack)[current]["status"].get("availableReplicas") or 0) == 0
    assert deletion_events(stack) == []

    stack.simulation.scheduler.add_node("gpu-1", gpu)
    eventually(
        lambda: set(replica_sets(stack)) == {users_name, current},
        timeout=DELIVERY_SECONDS,
        message=lambda: f"the gated-only ReplicaSet deleted, the user's kept: {sorted(replica_sets(stack))}",
    )
    kept = replica_sets(stack)
    assert int(kept[current]["status"].get("availableReplicas") or 0) == 1
    assert not gated(kept[users_name]["spec"]["template"])
    events = eventually(lambda: deletion_events(stack), message="an Event about the deleted ReplicaSet")
    assert len(events) == 1, events
    assert stale in events[0]["message"]
