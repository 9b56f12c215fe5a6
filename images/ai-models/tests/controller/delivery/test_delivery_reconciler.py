"""The delivery controller (built in the test process on the one runtime) against the API emulator,
with the cluster simulation and the REAL `ai-models materialize` run by the Job runner against the
api serving a stored artifact."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import JOBS
from ai_models.controller.delivery.jobs import SELECTOR
from ai_models.domain.artifacts.layout import file_key
from ai_models.domain.delivery.claim_layout import completion_record, object_dir
from ai_models.domain.delivery.template import applied, gated
from ai_models.domain.jobs import is_running
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_TEMPLATE_LABEL,
    DELIVERY_TEMPLATE_LABEL_VALUE,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_DIR,
    SHARED_PVC_LABEL,
    DeliveryReason,
    ModelKind,
    ModelPhase,
)
from fakes.served_artifacts import create_model, mark_ready, publish_ready, store_artifact
from kubeemu.authn import Identity
from support.eventually import eventually
from testbed.mounts import claim_directory, pod_mounts

FILES = {
    "config.json": b'{"model_type": "llama"}',
    "tokenizer/vocab.json": b'{"a": 1}',
    "model.safetensors": bytes(range(256)) * 2048,
}
NAMESPACE = "team-a"  # the conftest's
Stack = Any  # conftest.DeliveryStack
LLAMA = ModelKey(ModelKind.MODEL, NAMESPACE, "llama")
DELIVERY_SECONDS = 90


def ready_model(stack: Stack, name: str = "llama") -> str:
    """A Ready Model with FILES stored; its digest, once the controller's Model cache has it."""
    _, digest = publish_ready(stack.emulator, stack.store, name, FILES, namespace=NAMESPACE)
    key = ModelKey(ModelKind.MODEL, NAMESPACE, name)
    eventually(
        lambda: ((stack.model_of(key) or {}).get("status") or {}).get("phase") == ModelPhase.READY,
        message=f"{key} Ready in the Model cache",
    )
    return digest


def pods(stack: Stack, app: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stack.items(
        f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3D{app}"
    )
    return found


def pod_runs(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def reported(
    stack: Stack, name: str, reason: DeliveryReason, *, kind: str = "Deployment"
) -> Callable[[], bool]:
    return lambda: bool(stack.report(name, kind=kind)[0] == reason.value)


def describe(stack: Stack, name: str, *, kind: str = "Deployment") -> Callable[[], str]:
    return lambda: f"report of {kind} {name}: {stack.report(name, kind=kind)}"


def test_a_deployment_for_a_ready_model_ends_delivered_from_a_verified_claim_with_its_pods_ungated(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    digest = ready_model(stack)
    created = stack.deployment("web", models="llama")
    admitted = created["spec"]["template"]
    assert gated(admitted), "the admission webhook's template waits for the claim"

    eventually(
        reported(stack, "web", DeliveryReason.DELIVERED),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )

    workload = stack.workload("web")
    template = workload["spec"]["template"]
    record = applied(template)
    assert record is not None
    assert record.claim is not None
    assert template == admitted, "the complete template written at CREATE is kept: its Pods are ungated"
    claim = stack.get(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{record.claim}")
    assert claim is not None
    assert claim["metadata"]["labels"][SHARED_PVC_LABEL] == "true"
    assert claim["metadata"]["annotations"][MATERIALIZED_DIGESTS_ANNOTATION] == digest
    directory = claim_directory(stack.emulator.cluster, NAMESPACE, record.claim)
    tree = directory / object_dir(digest)
    for path, data in FILES.items():
        assert hashlib.sha256((tree / path).read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert json.loads((directory / completion_record(digest)).read_text())["digest"] == digest

    def running_ungated() -> list[dict[str, Any]]:
        found = pods(stack, "web")
        assert len(found) == 2, [pod["metadata"]["name"] for pod in found]
        for pod in found:
            gates = [gate.get("name") for gate in pod["spec"].get("schedulingGates") or []]
            assert DELIVERY_SCHEDULING_GATE not in gates, pod["metadata"]["name"]
            assert (pod.get("status") or {}).get("phase") == "Running", pod["metadata"]["name"]
        return found

    for pod in eventually(running_ungated, timeout=DELIVERY_SECONDS, message="both Pods ungated and Running"):
        mounts = {mount.mount_path: mount for mount in pod_mounts(stack.emulator.cluster, pod)}
        assert mounts[f"{MODELS_DIR}/llama"].host_path == tree
    replica_sets = stack.items(f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets")
    assert len(replica_sets) == 1, "a Deployment created for a Ready model keeps one ReplicaSet"


def test_the_controller_labels_a_workload_it_writes_and_unlabels_it_once_the_annotations_go(
    start_delivery: Callable[..., Stack],
) -> None:
    # The stack admits without the label, as a workload delivered before the label existed (D158).
    stack = start_delivery()
    ready_model(stack)
    created = stack.deployment("web", models="llama", replicas=1)
    assert DELIVERY_TEMPLATE_LABEL not in (created["metadata"].get("labels") or {})

    def labelled() -> bool:
        labels = stack.workload("web")["metadata"].get("labels") or {}
        return labels.get(DELIVERY_TEMPLATE_LABEL) == DELIVERY_TEMPLATE_LABEL_VALUE

    eventually(labelled, timeout=DELIVERY_SECONDS, message=describe(stack, "web"))
    eventually(reported(stack, "web", DeliveryReason.DELIVERED), timeout=DELIVERY_SECONDS)
    assert labelled()

    status, _, body = stack.emulator.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web",
        body={"metadata": {"annotations": {MODEL_ANNOTATION: None}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body

    def stripped() -> bool:
        current = stack.workload("web")
        return applied(current["spec"]["template"]) is None and DELIVERY_TEMPLATE_LABEL not in (
            current["metadata"].get("labels") or {}
        )

    eventually(stripped, timeout=DELIVERY_SECONDS, message=describe(stack, "web"))


def test_a_statefulset_and_a_cronjob_for_a_ready_model_end_delivered(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    digest = ready_model(stack)
    stack.apply_workload("StatefulSet", "db", models="llama", replicas=1)
    cron = stack.apply_workload("CronJob", "nightly", models="llama")

    for kind, name in (("StatefulSet", "db"), ("CronJob", "nightly")):
        eventually(
            reported(stack, name, DeliveryReason.DELIVERED, kind=kind),
            timeout=DELIVERY_SECONDS,
            message=describe(stack, name, kind=kind),
        )

    def running_pod() -> dict[str, Any]:
        found = [item for item in pods(stack, "db") if pod_runs(item)]
        assert found
        return found[0]

    pod = eventually(
        running_pod, timeout=DELIVERY_SECONDS, message="the StatefulSet's Pod ungated and Running"
    )
    mounts = {mount.mount_path: mount for mount in pod_mounts(stack.emulator.cluster, pod)}
    seen = mounts[f"{MODELS_DIR}/llama"].host_path
    assert seen is not None
    assert seen.as_posix().endswith(object_dir(digest))
    template = stack.workload("nightly", kind="CronJob")["spec"]["jobTemplate"]["spec"]["template"]
    assert template == cron["spec"]["jobTemplate"]["spec"]["template"], "kept as admitted"
    record = applied(template)
    assert record is not None
    assert [model.digest for model in record.models] == [digest]


def test_a_model_not_ready_gives_model_not_ready_and_changes_nothing_else(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    create_model(stack.emulator, "llama", namespace=NAMESPACE)  # no artifact yet: Pending
    eventually(lambda: stack.model_of(LLAMA) is not None, message="the Model in the Model cache")
    created = stack.deployment("web", models="llama")

    eventually(
        reported(stack, "web", DeliveryReason.MODEL_NOT_READY),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )

    workload = stack.workload("web")
    assert workload["spec"]["template"] == created["spec"]["template"]
    assert workload["metadata"]["generation"] == created["metadata"]["generation"]
    assert "not Ready" in (stack.report("web")[1] or "")
    assert stack.items(f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims") == []
    assert stack.items(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs") == []

    def two_pods() -> list[dict[str, Any]]:
        found = pods(stack, "web")
        assert len(found) == 2
        return found

    for pod in eventually(two_pods, message="two Pods"):
        gates = [gate.get("name") for gate in pod["spec"].get("schedulingGates") or []]
        assert gates == [DELIVERY_SCHEDULING_GATE]


def test_a_workload_waiting_for_its_model_is_delivered_once_the_model_turns_ready(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    owner = create_model(stack.emulator, "llama", namespace=NAMESPACE)
    eventually(lambda: stack.model_of(LLAMA) is not None, message="the Model in the Model cache")
    stack.deployment("web", models="llama", replicas=1)
    eventually(
        reported(stack, "web", DeliveryReason.MODEL_NOT_READY),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )

    digest = store_artifact(stack.store, owner, FILES)
    mark_ready(stack.emulator, owner, digest, size=sum(len(data) for data in FILES.values()))

    eventually(
        reported(stack, "web", DeliveryReason.DELIVERED),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )
    template = stack.workload("web")["spec"]["template"]
    record = applied(template)
    assert record is not None
    assert [(model.name, model.digest) for model in record.models] == [("llama", digest)]
    assert not gated(template), "the template the controller finishes needs no gate"


def test_a_failed_materialization_is_reported_with_the_materializers_message_and_retried_until_delivered(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery()
    fixed = bytes(reversed(FILES["model.safetensors"]))  # what the manifest names, same size
    recorded = {"model.safetensors": hashlib.sha256(fixed).hexdigest()}
    owner, digest = publish_ready(
        stack.emulator, stack.store, "llama", FILES, namespace=NAMESPACE, manifest_sha256=recorded
    )
    eventually(lambda: stack.model_of(LLAMA) is not None, message="the Model in the Model cache")
    stack.deployment("web", models="llama", replicas=1)

    eventually(
        reported(stack, "web", DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )
    message = stack.report("web")[1] or ""
    assert "model.safetensors" in message, message  # the materializer's own outcome, about the file

    # The store's file now matches its manifest: a later Job delivers it.
    stack.store.put_bytes(file_key(owner, digest, "model.safetensors"), fixed)
    eventually(
        reported(stack, "web", DeliveryReason.DELIVERED),
        timeout=DELIVERY_SECONDS,
        message=describe(stack, "web"),
    )


RBAC = "rbac.authorization.k8s.io"
ALL = ["*"]
READ_PATCH_DELETE = ["get", "list", "watch", "patch", "update", "delete"]
CORE_BUT_CLAIMS = ["pods", "events", "persistentvolumes", "secrets", "serviceaccounts"]
# What the delivery controller may do: everything, except creating Jobs, or claims.
WITHOUT_JOB_CREATE = [
    {"apiGroups": [""], "resources": ALL, "verbs": ALL},
    {"apiGroups": ["apps", "storage.k8s.io", "ai.deckhouse.io"], "resources": ALL, "verbs": ALL},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": READ_PATCH_DELETE},
]
WITHOUT_CLAIM_CREATE = [
    {"apiGroups": [""], "resources": CORE_BUT_CLAIMS, "verbs": ALL},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": READ_PATCH_DELETE},
    {"apiGroups": ["apps", "storage.k8s.io", "ai.deckhouse.io", "batch"], "resources": ALL, "verbs": ALL},
]


def controller_allowed(emulator: Any, name: str, rules: list[dict[str, Any]]) -> Identity:
    identity: Identity = emulator.add_identity(Identity(name=name, token=name))
    role = {"apiVersion": f"{RBAC}/v1", "metadata": {"name": name}}
    emulator.cluster.apply({**role, "kind": "ClusterRole", "rules": rules})
    emulator.cluster.apply(
        {
            **role,
            "kind": "ClusterRoleBinding",
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "User", "name": name, "apiGroup": RBAC}],
        }
    )
    return identity


@pytest.mark.parametrize(
    ("rules", "reason", "refused"),
    [
        (WITHOUT_JOB_CREATE, DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED, "Job"),
        (WITHOUT_CLAIM_CREATE, DeliveryReason.SHARED_PVC_CLAIM_PENDING, "PersistentVolumeClaim"),
    ],
)
def test_an_object_the_api_server_refuses_is_reported_naming_it_and_the_answer(
    start_delivery: Callable[..., Stack],
    kube_emulator: Any,
    rules: list[dict[str, Any]],
    reason: DeliveryReason,
    refused: str,
) -> None:
    stack = start_delivery(identity=controller_allowed(kube_emulator, "delivery-limited", rules))
    ready_model(stack)
    stack.deployment("web", models="llama", replicas=1)

    def refusal_reported() -> str:
        got, message = stack.report("web")
        assert got == reason.value
        assert isinstance(message, str)
        assert message.startswith(f"cannot create the {refused} {NAMESPACE}/ai-models-web-")
        return message

    message = eventually(refusal_reported, timeout=DELIVERY_SECONDS, message=describe(stack, "web"))
    assert "HTTP 403" in message, message
    assert "tries again" in message
    assert stack.items(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs") == []


class RunningJobs:
    """Counts the running materialize Jobs at every watch event about them."""

    def __init__(self, stack: Stack) -> None:
        self.most = 0
        self.names: set[str] = set()
        self._lock = threading.Lock()
        self.informer = Informer(stack.emulator.api_client(), JOBS, label_selector=SELECTOR, name="test-jobs")
        self.informer.add_handler(self._changed)

    def _changed(self, _old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        running = sum(1 for job in self.informer.objects() if is_running(job))
        with self._lock:
            self.most = max(self.most, running)
            if new is not None:
                self.names.add(str(new["metadata"]["name"]))


def test_four_workloads_with_a_limit_of_one_never_run_two_materialize_jobs_at_once(
    start_delivery: Callable[..., Stack],
) -> None:
    stack = start_delivery(limit=1)
    counter = RunningJobs(stack)
    counter.informer.start()
    try:
        assert counter.informer.wait_synced(10)
        ready_model(stack)
        names = [f"web-{index}" for index in range(4)]
        for name in names:
            stack.deployment(name, models="llama", replicas=1)

        for name in names:
            eventually(
                reported(stack, name, DeliveryReason.DELIVERED),
                timeout=DELIVERY_SECONDS * 2,
                message=describe(stack, name),
            )
        waiting = [
            event
            for event in stack.items(f"/api/v1/namespaces/{NAMESPACE}/events")
            if "waiting for a materialization slot" in str(event.get("message"))
        ]
    finally:
        counter.informer.stop()
    assert len(counter.names) == 4, counter.names
    assert counter.most == 1
    assert waiting, "a workload that waited for the slot said so"
