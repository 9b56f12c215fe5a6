"""The delivery controller takes back the shared claims a workload no longer uses (issue 12, D100):
removing the annotations removes the claim too, a new model set leaves no old full-size claim,
a claim is never deleted while a Pod of the workload mounts it, and a claim of another workload or
one the module did not make is never touched.

Every claim change is recorded at every watch event of the emulator's store: a claim is deleted
only after a pass marked it (`ai.deckhouse.io/unreferenced-since`) and at least the grace period
(3 s here) after the time the mark says.

The tests share one stack (D118), each in a namespace of its own (`stack.namespace`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pytest

from ai_models import names
from ai_models.domain.conditions import parse_timestamp
from cluster.delivery_stack import (
    REPORT_MESSAGE,
    REPORT_REASON,
    DeliveryStack,
    deployment,
    fresh_namespace,
    shared_delivery_stack,
)
from fakes.hub_corpus import repository
from fakes.model_files import safetensors_bytes
from kubeemu.pytest_fixtures import RunningEmulator
from kubeemu.store import WatchEvent

CONFIG = (
    b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
    b'"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256, "torch_dtype": "bfloat16"}'
)


def files(vocab: int) -> dict[str, bytes]:
    return {
        "config.json": CONFIG,
        "model.safetensors": safetensors_bytes(
            {"model.embed_tokens.weight": ("BF16", (vocab, 64)), "lm_head.weight": ("BF16", (vocab, 64))}
        ),
        "tokenizer.json": b'{"version": "1.0"}',
    }


TINY = repository("acme/tiny-llama", files(256))
SMALL = repository("acme/small-llama", files(128))
GRACE = dt.timedelta(seconds=3)
CONTROLLER_ENV = {"AI_MODELS_DELIVERY_CLAIM_GRACE_SECONDS": str(int(GRACE.total_seconds()))}
MARK = names.SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION
NOWHERE = {"ai-models-test/nowhere": "true"}  # a nodeSelector no node of the test bed has


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeliveryStack]:
    workdir = tmp_path_factory.mktemp("delivery-cleanup")
    with shared_delivery_stack(workdir, [TINY, SMALL], controller_env=CONTROLLER_ENV) as stack:
        yield stack


@pytest.fixture
def stack(shared: DeliveryStack) -> Iterator[DeliveryStack]:
    yield from fresh_namespace(shared)


@dataclasses.dataclass(frozen=True)
class ClaimEvent:
    type: str
    name: str
    uid: str
    mark: str | None
    at: dt.datetime  # wall clock when the store emitted it
    pods: frozenset[str]  # the Pods that mounted the claim at that event


class ClaimHistory:
    """Every watch event of the emulator's claims from subscription on (the current ones as ADDED),
    each with the Pods of the namespace that mounted the claim at that moment (from the Pods' own
    watch events, in the store's order)."""

    def __init__(self, emulator: RunningEmulator, namespace: str) -> None:
        claims = emulator.cluster.resource("", "v1", "persistentvolumeclaims")
        pods = emulator.cluster.resource("", "v1", "pods")
        assert claims is not None
        assert pods is not None
        self._store = emulator.cluster.store
        self._namespace = namespace
        self._keys = (pods.storage_key, claims.storage_key)
        self._lock = threading.Lock()
        self._events: list[ClaimEvent] = []
        self._mounts: dict[str, set[str]] = {}  # pod name -> the claims it mounts

    def offer(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if meta.get("namespace") != self._namespace:
            return
        name = str(meta.get("name") or "")
        with self._lock:
            if "containers" in (event.obj.get("spec") or {}):  # a Pod (claims have no containers)
                if event.type == "DELETED":
                    self._mounts.pop(name, None)
                else:
                    self._mounts[name] = mounted(event.obj)
                return
            self._events.append(
                ClaimEvent(
                    event.type,
                    name,
                    str(meta.get("uid") or ""),
                    (meta.get("annotations") or {}).get(MARK),
                    dt.datetime.now(dt.UTC),
                    frozenset(pod for pod, claims in self._mounts.items() if name in claims),
                )
            )

    def of(self, name: str) -> list[ClaimEvent]:
        with self._lock:
            return [event for event in self._events if event.name == name]

    def marked(self, name: str) -> bool:
        return any(event.mark is not None for event in self.of(name))

    def __enter__(self) -> ClaimHistory:
        with self._store.lock:
            for key in self._keys:
                initial, _ = self._store.subscribe(key, self, since=None)
                for event in initial:
                    self.offer(event)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for key in self._keys:
            self._store.unsubscribe(key, self)


def assert_marked_then_deleted_after_grace(history: ClaimHistory, name: str) -> None:
    events = history.of(name)
    deleted = [event for event in events if event.type == "DELETED"]
    assert deleted, [dataclasses.astuple(event) for event in events]
    marks = [event for event in events if event.mark is not None]
    assert marks, f"{name} deleted without a mark first: {[dataclasses.astuple(e) for e in events]}"
    first = marks[0]
    assert events.index(first) < events.index(deleted[0])
    since = parse_timestamp(first.mark)
    assert since is not None, first.mark
    # The mark a pass wrote, and a later pass deleted it no earlier than the grace after it.
    assert deleted[0].at - since >= GRACE, (first.mark, deleted[0].at)
    # The claim was marked once and kept its mark until it went: never re-marked (a hook or a
    # second writer resetting it would show here).
    assert {event.mark for event in marks} == {first.mark}, [e.mark for e in marks]
    # No Pod mounted it when it was marked, nor at any event from then on.
    after = events[events.index(first) :]
    assert all(not event.pods for event in after), [(e.type, e.mark, sorted(e.pods)) for e in after]


def module_claims(stack: DeliveryStack) -> list[str]:
    return sorted(
        claim["metadata"]["name"]
        for claim in stack.claims()
        if (claim["metadata"].get("labels") or {}).get(names.MODULE_LABEL) == names.MODULE
    )


def claims_of(stack: DeliveryStack, uid: str) -> list[str]:
    return sorted(
        claim["metadata"]["name"]
        for claim in stack.claims()
        if (claim["metadata"].get("labels") or {}).get(names.OWNER_UID_LABEL) == uid
    )


def mounted(obj: dict[str, Any]) -> set[str]:
    return {
        str(volume["persistentVolumeClaim"]["claimName"])
        for volume in (obj.get("spec") or {}).get("volumes") or []
        if volume.get("persistentVolumeClaim")
    }


def running_pods_mount(stack: DeliveryStack, selector: str, claim: str) -> bool:
    pods = stack.pods(selector=selector)
    return bool(pods) and all(
        mounted(pod) == {claim}
        and not pod["spec"].get("schedulingGates")
        and (pod.get("status") or {}).get("phase") == "Running"
        for pod in pods
    )


def delivered(stack: DeliveryStack, name: str) -> tuple[dict[str, Any], str]:
    """Wait until `name` is Delivered and its one Pod runs from its claim; the workload, its claim."""
    stack.wait_reason("Deployment", name, names.DeliveryReason.DELIVERED, timeout=60)
    workload = stack.workload("Deployment", name)
    [claim] = claims_of(stack, workload["metadata"]["uid"])
    stack.models.eventually(
        lambda: running_pods_mount(stack, f"app={name}", claim),
        timeout=30,
        what=lambda: f"{name}'s pods run from {claim}\n{stack.describe()}",
    )
    return workload, claim


def delivery_events(stack: DeliveryStack, reason: str) -> list[dict[str, Any]]:
    return [
        event
        for event in stack.core.list_namespaced_event(stack.namespace).to_dict()["items"]
        if event.get("reason") == reason
    ]


def ready_models(stack: DeliveryStack, *models: tuple[str, str]) -> None:
    for name, repo in models:
        stack.ready_model(name, repo)


# ----- (a) removing the annotations ----------------------------------------------------------------


def test_removing_the_annotations_removes_the_claim_after_the_grace_and_nothing_of_the_module_remains(
    stack: DeliveryStack,
) -> None:
    ready_models(stack, ("tiny", "acme/tiny-llama"))
    users = deployment("web", models="tiny", namespace=stack.namespace)
    stack.apply_workload(users)
    _, claim = delivered(stack, "web")

    with ClaimHistory(stack.emulator, stack.namespace) as history:
        # As `kubectl apply` sends a removed annotation: a merge patch dropping only it.
        stack.apps.patch_namespaced_deployment(
            "web", stack.namespace, {"metadata": {"annotations": {names.MODEL_ANNOTATION: None}}}
        )
        stack.models.eventually(
            lambda: claim not in module_claims(stack),
            timeout=40,
            what=lambda: f"{claim} deleted after the grace\n{stack.describe()}",
        )
    assert_marked_then_deleted_after_grace(history, claim)
    workload = stack.workload("Deployment", "web")
    assert workload["spec"]["template"] == users["spec"]["template"]
    annotations = workload["metadata"].get("annotations") or {}
    assert not {REPORT_REASON, REPORT_MESSAGE, names.MODEL_ANNOTATION} & set(annotations), annotations
    assert module_claims(stack) == []
    assert stack.jobs() == []
    assert stack.materialization_secrets() == []
    assert all(not mounted(pod) for pod in stack.pods(selector="app=web"))
    [event] = delivery_events(stack, names.DeliveryEvent.SHARED_CLAIM_DELETED)
    assert event["involved_object"]["name"] == "web", event
    assert claim in event["message"], event


# ----- (b) another model set -----------------------------------------------------------------------


def test_a_new_model_set_rolls_the_pods_to_its_claim_then_the_old_claim_goes_after_the_grace(
    stack: DeliveryStack,
) -> None:
    ready_models(stack, ("tiny", "acme/tiny-llama"), ("small", "acme/small-llama"))
    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    workload, old = delivered(stack, "web")
    uid = workload["metadata"]["uid"]

    with ClaimHistory(stack.emulator, stack.namespace) as history:
        stack.apps.patch_namespaced_deployment(
            "web", stack.namespace, {"metadata": {"annotations": {names.MODEL_ANNOTATION: "tiny,small"}}}
        )
        stack.models.eventually(lambda: len(claims_of(stack, uid)) == 2, timeout=30, what=stack.describe)
        [new] = [name for name in claims_of(stack, uid) if name != old]
        message = stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED, timeout=60)
        stack.models.eventually(
            lambda: "small" in stack.report("Deployment", "web")[1] and claims_of(stack, uid) == [new],
            timeout=40,
            what=lambda: f"pods on {new}, {old} deleted: {message}\n{stack.describe()}",
        )
    assert running_pods_mount(stack, "app=web", new), stack.describe()
    assert_marked_then_deleted_after_grace(history, old)
    assert any(event.pods for event in history.of(old)), "the old pods mounted it while they ran"
    assert not history.marked(new)
    [claim] = [c for c in stack.claims() if c["metadata"]["name"] == new]
    assert MARK not in (claim["metadata"].get("annotations") or {})


# ----- (c) a Pod still mounts it --------------------------------------------------------------------


def test_a_claim_is_kept_past_the_grace_while_a_pod_of_the_workload_still_mounts_it(
    stack: DeliveryStack,
) -> None:
    ready_models(stack, ("tiny", "acme/tiny-llama"), ("small", "acme/small-llama"))
    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    workload, old = delivered(stack, "web")
    uid = workload["metadata"]["uid"]

    with ClaimHistory(stack.emulator, stack.namespace) as history:
        # The new pods cannot be scheduled, so the rollout stops with the old pods running.
        stack.apps.patch_namespaced_deployment(
            "web",
            stack.namespace,
            {
                "metadata": {"annotations": {names.MODEL_ANNOTATION: "tiny,small"}},
                "spec": {"template": {"spec": {"nodeSelector": NOWHERE}}},
            },
        )
        stack.models.eventually(
            lambda: (
                "small" in stack.report("Deployment", "web")[1]
                and stack.report("Deployment", "web")[0] == names.DeliveryReason.DELIVERED
            ),
            timeout=60,
            what=lambda: f"delivered with small: {stack.report('Deployment', 'web')}\n{stack.describe()}",
        )
        [new] = [name for name in claims_of(stack, uid) if name != old]
        assert new in mounted(stack.workload("Deployment", "web")["spec"]["template"])
        time.sleep(2 * GRACE.total_seconds())  # past the grace, the controller's resync included
        users_of_old = [p["metadata"]["name"] for p in stack.pods(selector="app=web") if old in mounted(p)]
        assert users_of_old, stack.describe()
        assert claims_of(stack, uid) == sorted([old, new])
        assert not history.marked(old), [dataclasses.astuple(e) for e in history.of(old)]

        # The rollout goes on: once the old pods are gone, the old claim is marked, then deleted.
        stack.apps.patch_namespaced_deployment(
            "web", stack.namespace, {"spec": {"template": {"spec": {"nodeSelector": None}}}}
        )
        stack.models.eventually(
            lambda: claims_of(stack, uid) == [new],
            timeout=40,
            what=lambda: f"{old} deleted after the rollout\n{stack.describe()}",
        )
    assert_marked_then_deleted_after_grace(history, old)
    assert running_pods_mount(stack, "app=web", new), stack.describe()


# ----- (d) claims of others ------------------------------------------------------------------------


def foreign_claim(
    stack: DeliveryStack, name: str, labels: dict[str, str], owner: dict[str, Any] | None
) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": stack.namespace, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    stack.core.create_namespaced_persistent_volume_claim(
        stack.namespace,
        {
            "metadata": meta,
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )


def test_a_claim_of_another_workload_or_not_made_by_the_module_is_never_touched(
    stack: DeliveryStack,
) -> None:
    ready_models(stack, ("tiny", "acme/tiny-llama"))
    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    stack.apply_workload(deployment("api", models="tiny", namespace=stack.namespace))
    web, mine = delivered(stack, "web")
    _, theirs = delivered(stack, "api")
    uid = web["metadata"]["uid"]
    shared = {names.SHARED_PVC_LABEL: names.SHARED_PVC_LABEL_VALUE}
    # Labelled as web's module claim, without the ownerReference: anyone can set labels.
    foreign_claim(
        stack, "labelled-only", {**shared, names.MODULE_LABEL: names.MODULE, names.OWNER_UID_LABEL: uid}, None
    )
    # Owned by web (it is in web's index), but not labelled by the module.
    foreign_claim(stack, "owned-not-module", {**shared, names.OWNER_UID_LABEL: uid}, web)
    untouched = ["labelled-only", "owned-not-module", theirs]

    with ClaimHistory(stack.emulator, stack.namespace) as history:
        stack.apps.patch_namespaced_deployment(
            "web", stack.namespace, {"metadata": {"annotations": {names.MODEL_ANNOTATION: None}}}
        )
        stack.models.eventually(
            lambda: mine not in module_claims(stack),
            timeout=40,
            what=lambda: f"{mine} deleted\n{stack.describe()}",
        )
        time.sleep(GRACE.total_seconds() + 1)  # one more grace: nothing else is marked or deleted
    assert_marked_then_deleted_after_grace(history, mine)
    left = {claim["metadata"]["name"] for claim in stack.claims()}
    assert set(untouched) <= left, (untouched, left)
    for name in untouched:
        assert not history.marked(name), [dataclasses.astuple(e) for e in history.of(name)]
        assert all(event.type == "ADDED" or event.mark is None for event in history.of(name))
    assert stack.report("Deployment", "api")[0] == names.DeliveryReason.DELIVERED
    assert running_pods_mount(stack, "app=api", theirs)
