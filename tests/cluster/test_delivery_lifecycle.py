"""SharedPVC delivery over a workload's life, end to end (the stack of `cluster.delivery_stack`):
a Deployment created before its model is Ready ends with one ReplicaSet, one created for a Ready
model has one all along; StatefulSets, DaemonSets and CronJobs are delivered; removing the
annotations takes back everything the module added; deleting the workload takes the claim, its
Job and both Secrets with it; and the controller's orphan pass deletes a module claim whose
workload is gone and only its own materialize Job still mounts, and never a foreign claim that
carries the shared-claim label.

The tests share one stack (D118), each in a namespace of its own (`stack.namespace`).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from ai_models import names
from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import PERSISTENT_VOLUME_CLAIMS
from ai_models.controller.delivery.informers import CLAIM_SELECTOR, WORKLOAD_RESOURCES
from ai_models.controller.delivery.jobs import job_name, registry_secret_name, token_secret_name
from ai_models.controller.delivery.orphans import OrphanedClaims, OrphanPassResult
from cluster.delivery_stack import (
    REPORT_MESSAGE,
    REPORT_REASON,
    TINY,
    TINY_FILES,
    DeliveryStack,
    deployment,
    digests,
    fresh_namespace,
    shared_delivery_stack,
)
from kubeemu.cluster import Cluster
from kubeemu.store import WatchEvent

SOURCE = {"url": "https://huggingface.co/acme/tiny-llama"}
HOOKS_DIR = Path(__file__).resolve().parents[2] / "hooks"
LONG_AGO = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
FOREIGN_CLAIM = "team-data"  # labelled as a shared claim by someone else, not made by the module


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeliveryStack]:
    with shared_delivery_stack(tmp_path_factory.mktemp("delivery-lifecycle"), [TINY]) as stack:
        yield stack


@pytest.fixture
def stack(shared: DeliveryStack) -> Iterator[DeliveryStack]:
    yield from fresh_namespace(shared)


# ----- workloads -----------------------------------------------------------------------------------


def workload_manifest(kind: str, name: str, namespace: str, *, models: str | None = "tiny") -> dict[str, Any]:
    """A user's Deployment, StatefulSet, DaemonSet or CronJob (`models` None: no annotation)."""
    base = deployment(name, models=models, namespace=namespace)
    if not base["metadata"]["annotations"]:
        del base["metadata"]["annotations"]
    if kind == "Deployment":
        return base
    spec = base["spec"]
    if kind == "StatefulSet":
        return {**base, "kind": kind, "spec": {**spec, "serviceName": name}}
    if kind == "DaemonSet":
        return {**base, "kind": kind, "spec": {"selector": spec["selector"], "template": spec["template"]}}
    assert kind == "CronJob", kind
    template = copy.deepcopy(spec["template"])
    template["spec"]["restartPolicy"] = "Never"
    return {
        **base,
        "apiVersion": "batch/v1",
        "kind": kind,
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}},
    }


def owned_replica_sets(stack: DeliveryStack, name: str) -> list[dict[str, Any]]:
    return [
        rs
        for rs in stack.replica_sets()
        if any(ref.get("name") == name for ref in rs["metadata"].get("ownerReferences") or [])
    ]


def template_claims(template: Mapping[str, Any]) -> list[str]:
    return [
        str(volume["persistentVolumeClaim"]["claimName"])
        for volume in (template.get("spec") or {}).get("volumes") or []
        if "persistentVolumeClaim" in volume
    ]


def gates(pod_or_template: Mapping[str, Any]) -> list[str]:
    return [gate["name"] for gate in (pod_or_template.get("spec") or {}).get("schedulingGates") or []]


def env_of(pod: Mapping[str, Any]) -> dict[str, str | None]:
    container = pod["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container.get("env") or []}


def wait_delivered_pod(stack: DeliveryStack, pods: Callable[[], list[dict[str, Any]]]) -> dict[str, Any]:
    """The first pod `pods` lists once it is ungated and sees every file of the model."""
    wanted = digests(TINY_FILES)
    found: list[dict[str, Any]] = []

    def ready() -> bool:
        found[:] = [pod for pod in pods() if not gates(pod) and stack.delivered_files(pod, "tiny") == wanted]
        return bool(found)

    stack.models.eventually(
        ready,
        timeout=60,
        what=lambda: f"an ungated pod that sees the model's files\n{stack.describe()}",
    )
    return found[0]


def assert_models_env(pod: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    env = env_of(pod)
    assert env[names.MODELS_DIR_VARIABLE] == names.MODELS_DIR
    assert json.loads(str(env["AI_MODELS_MODELS"])) == [
        {"name": "tiny", "path": f"{names.MODELS_DIR}/tiny", "digest": status["artifact"]["digest"]}
    ]


class ReplicaSetCount:
    """The number of a Deployment's ReplicaSets after every ReplicaSet watch event of the emulator's
    store (a terminating one still counts: it exists)."""

    def __init__(self, cluster: Cluster, deployment_name: str, namespace: str) -> None:
        rtype = cluster.resource("apps", "v1", "replicasets")
        assert rtype is not None
        self._key = rtype.storage_key
        self._store = cluster.store
        self._deployment = deployment_name
        self._namespace = namespace
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self.counts: list[int] = []

    def offer(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        owners = meta.get("ownerReferences") or []
        if meta.get("namespace") != self._namespace or not any(
            ref.get("kind") == "Deployment" and ref.get("name") == self._deployment for ref in owners
        ):
            return
        with self._lock:
            if event.type == "DELETED":
                self._names.discard(str(meta["name"]))
            else:
                self._names.add(str(meta["name"]))
            self.counts.append(len(self._names))

    def __enter__(self) -> ReplicaSetCount:
        with self._store.lock:
            initial, _ = self._store.subscribe(self._key, self, since=None)
            for event in initial:
                self.offer(event)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._store.unsubscribe(self._key, self)


# ----- the orphan pass on the emulator's objects --------------------------------------------------


def run_orphan_pass(stack: DeliveryStack) -> OrphanPassResult:
    """One pass of the controller's orphan pass (D152) over the emulator's objects as the API lists
    them now, with informers of its own; what it did in the test's namespace (the other tests'
    namespaces share the cluster, and a claim is judged by its own namespace only)."""
    api_client = stack.core.api_client
    informers = [
        Informer(api_client, PERSISTENT_VOLUME_CLAIMS, label_selector=CLAIM_SELECTOR).start(),
        *(Informer(api_client, resource).start() for resource in WORKLOAD_RESOURCES.values()),
    ]
    try:
        for informer in informers:
            assert informer.wait_synced(10)
        claims, *workloads = informers
        result = OrphanedClaims(
            objects=DeliveryObjects(api_client),
            claims=claims,
            workloads=workloads,
            grace=dt.timedelta(hours=1),
            interval=dt.timedelta(minutes=15),
            clock=lambda: dt.datetime.now(dt.UTC),
        ).run()
    finally:
        for informer in informers:
            informer.stop()
    mine = f"{stack.namespace}/"
    return OrphanPassResult(
        marked=[item for item in result.marked if item.startswith(mine)],
        unmarked=[item for item in result.unmarked if item.startswith(mine)],
        deleted=[item for item in result.deleted if item.startswith(mine)],
        failed_namespaces=[item for item in result.failed_namespaces if item == stack.namespace],
    )


def vanish(stack: DeliveryStack, api_version: str, kind: str, name: str) -> None:
    """Take the object out of the emulator's store as if deleted with no garbage collection after
    it (a collector that could not finish): its dependents keep their ownerReferences."""
    cluster = stack.emulator.cluster
    rtype = cluster.resource_for(api_version, kind)
    assert cluster.store.remove(rtype.storage_key, stack.namespace, name) is not None


def create_foreign_claim(stack: DeliveryStack) -> None:
    """A claim someone else labelled as shared (and even as the module's), marked unreferenced long ago."""
    stack.core.create_namespaced_persistent_volume_claim(
        stack.namespace,
        {
            "metadata": {
                "name": FOREIGN_CLAIM,
                "labels": {
                    names.SHARED_PVC_LABEL: names.SHARED_PVC_LABEL_VALUE,
                    names.MODULE_LABEL: names.MODULE,
                },
                "annotations": {names.SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: LONG_AGO},
            },
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )


def claim_mark(stack: DeliveryStack, claim: str) -> str | None:
    found = stack.core.read_namespaced_persistent_volume_claim(claim, stack.namespace)
    return (found.metadata.annotations or {}).get(names.SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION)


def mark_unreferenced_long_ago(stack: DeliveryStack, claim: str) -> None:
    """What an earlier pass wrote, a grace period ago."""
    stack.core.patch_namespaced_persistent_volume_claim(
        claim,
        stack.namespace,
        {"metadata": {"annotations": {names.SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: LONG_AGO}}},
    )


def module_claims(stack: DeliveryStack) -> list[dict[str, Any]]:
    return [claim for claim in stack.claims() if claim["metadata"]["name"] != FOREIGN_CLAIM]


def secret_names(stack: DeliveryStack) -> set[str]:
    status, _, body = stack.emulator.request("GET", f"/api/v1/namespaces/{stack.namespace}/secrets")
    assert status == 200, body
    return {item["metadata"]["name"] for item in body.get("items") or []}


# ----- 1. one ReplicaSet ---------------------------------------------------------------------------


def test_a_deployment_created_before_its_model_is_ready_ends_with_one_replica_set(
    stack: DeliveryStack,
) -> None:
    with ReplicaSetCount(stack.emulator.cluster, "web", stack.namespace) as watch:
        # The publish Job waits for the runner, so the Model is not Ready when the Deployment comes.
        stack.models.runner.pause_new_pods()
        stack.models.create_model("tiny", SOURCE, namespace=stack.namespace)
        stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
        stack.wait_reason("Deployment", "web", names.DeliveryReason.MODEL_NOT_READY, timeout=30)
        [gated_only] = owned_replica_sets(stack, "web")
        assert gates(gated_only["spec"]["template"]) == [names.DELIVERY_SCHEDULING_GATE]
        assert template_claims(gated_only["spec"]["template"]) == []

        stack.models.runner.resume()
        status = stack.models.wait_phase("tiny", "Ready", namespace=stack.namespace, timeout=60)
        stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED, timeout=60)
        pod = wait_delivered_pod(stack, lambda: stack.pods(selector="app=web"))
        stack.models.eventually(
            lambda: (
                [rs["metadata"]["name"] for rs in owned_replica_sets(stack, "web")]
                != [gated_only["metadata"]["name"]]
                and len(owned_replica_sets(stack, "web")) == 1
            ),
            timeout=30,
            what=lambda: (
                f"one ReplicaSet left: {[rs['metadata']['name'] for rs in owned_replica_sets(stack, 'web')]}"
            ),
        )
    [current] = owned_replica_sets(stack, "web")
    [claim] = module_claims(stack)
    assert template_claims(current["spec"]["template"]) == [claim["metadata"]["name"]]
    assert pod["metadata"]["name"].startswith(current["metadata"]["name"])
    assert_models_env(pod, status)
    # The gated-only ReplicaSet existed beside the complete one until the controller deleted it.
    assert max(watch.counts) == 2, watch.counts
    assert watch.counts[-1] == 1, watch.counts
    assert stack.report("Deployment", "web")[0] == names.DeliveryReason.DELIVERED


def test_a_deployment_created_for_a_ready_model_has_one_replica_set_at_every_event(
    stack: DeliveryStack,
) -> None:
    status = stack.ready_model("tiny", "acme/tiny-llama")
    with ReplicaSetCount(stack.emulator.cluster, "web", stack.namespace) as watch:
        stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
        stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED, timeout=60)
        pod = wait_delivered_pod(stack, lambda: stack.pods(selector="app=web"))
        stack.models.eventually(
            lambda: (stack.workload("Deployment", "web").get("status") or {}).get("availableReplicas") == 1,
            timeout=30,
            what=lambda: f"web available: {stack.workload('Deployment', 'web').get('status')}",
        )
    assert watch.counts, "no ReplicaSet event at all"
    assert set(watch.counts) == {1}, watch.counts
    assert_models_env(pod, status)


# ----- 2. the other kinds --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["StatefulSet", "DaemonSet", "CronJob"])
def test_each_workload_kind_is_delivered(stack: DeliveryStack, kind: str) -> None:
    status = stack.ready_model("tiny", "acme/tiny-llama")

    stack.apply_workload(workload_manifest(kind, "web", stack.namespace))

    message = stack.wait_reason(kind, "web", names.DeliveryReason.DELIVERED, timeout=60)
    assert "tiny" in message
    if kind == "CronJob":
        job = stack.simulation.workloads.trigger("web", stack.namespace)
        pod = wait_delivered_pod(
            stack, lambda: stack.simulation.workloads.pods_of("Job", job, stack.namespace)
        )
        template = stack.workload(kind, "web")["spec"]["jobTemplate"]["spec"]["template"]
    else:
        pod = wait_delivered_pod(
            stack, lambda: stack.simulation.workloads.pods_of(kind, "web", stack.namespace)
        )
        template = stack.workload(kind, "web")["spec"]["template"]
    [claim] = module_claims(stack)
    assert template_claims(template) == [claim["metadata"]["name"]]
    assert [claim["metadata"]["name"]] == [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert_models_env(pod, status)


# ----- 3. removing the annotations -----------------------------------------------------------------


def test_removing_the_annotations_takes_back_everything_the_module_added(stack: DeliveryStack) -> None:
    stack.ready_model("tiny", "acme/tiny-llama")
    users = workload_manifest("Deployment", "web", stack.namespace)
    stack.apply_workload(users)
    stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED, timeout=60)
    wait_delivered_pod(stack, lambda: stack.pods(selector="app=web"))
    [claim] = module_claims(stack)
    delivered = stack.workload("Deployment", "web")
    assert delivered["spec"]["template"] != users["spec"]["template"]  # the module did add its part

    # As `kubectl apply` sends a removed annotation: a merge patch that drops only it, so the
    # template still carries the module's part and the webhook must take it out in the same write.
    patched = stack.apps.patch_namespaced_deployment(
        "web", stack.namespace, {"metadata": {"annotations": {names.MODEL_ANNOTATION: None}}}
    )
    template = stack.apps.api_client.sanitize_for_serialization(patched.spec.template)
    assert template == users["spec"]["template"]

    def reported() -> dict[str, str]:
        annotations = stack.workload("Deployment", "web")["metadata"].get("annotations") or {}
        return {key: annotations[key] for key in (REPORT_REASON, REPORT_MESSAGE) if key in annotations}

    stack.models.eventually(lambda: reported() == {}, timeout=30, what=lambda: f"no report: {reported()}")

    def only_plain_pods() -> bool:
        pods = stack.pods(selector="app=web")
        return bool(pods) and all(
            not gates(pod)
            and not template_claims(pod)
            and names.MODELS_DIR_VARIABLE not in env_of(pod)
            and (pod.get("status") or {}).get("phase") == "Running"
            for pod in pods
        )

    stack.models.eventually(only_plain_pods, timeout=60, what=lambda: f"plain pods\n{stack.describe()}")
    assert stack.workload("Deployment", "web")["spec"]["template"] == users["spec"]["template"]
    name = claim["metadata"]["name"]
    assert all(
        name not in template_claims(rs["spec"]["template"]) or rs["spec"].get("replicas") == 0
        for rs in owned_replica_sets(stack, "web")
    )
    assert not any(name in template_claims(pod) for pod in stack.pods())


# ----- 4. deleting the workload --------------------------------------------------------------------


def test_deleting_the_workload_takes_its_claim_job_and_secrets_and_leaves_a_foreign_claim(
    stack: DeliveryStack,
) -> None:
    stack.ready_model("tiny", "acme/tiny-llama")
    create_foreign_claim(stack)
    stack.apply_workload(workload_manifest("Deployment", "web", stack.namespace))
    stack.wait_reason("Deployment", "web", names.DeliveryReason.DELIVERED, timeout=60)
    wait_delivered_pod(stack, lambda: stack.pods(selector="app=web"))
    # A second one deleted while it materializes: its Job and token Secret exist for certain.
    stack.models.runner.pause_new_pods()
    stack.apply_workload(workload_manifest("Deployment", "mid", stack.namespace))
    stack.models.eventually(
        lambda: (
            len(module_claims(stack)) == 2
            and any(j["metadata"]["name"].startswith("ai-models-mid-") for j in stack.jobs())
        ),
        timeout=30,
        what=lambda: f"the second claim and its Job\n{stack.describe()}",
    )
    claims = sorted(c["metadata"]["name"] for c in module_claims(stack))
    made = {
        *(f"claim {name}" for name in claims),
        # A succeeded Job goes once its claim records the copy, with both Secrets (the Job owns
        # them); the running one has all three.
        *(f"job {j['metadata']['name']}" for j in stack.jobs()),
        *(f"secret {token_secret_name(j['metadata']['name'])}" for j in stack.jobs()),
        *(f"secret {registry_secret_name(j['metadata']['name'])}" for j in stack.jobs()),
    }

    def leftovers() -> set[str]:
        return {
            *(f"claim {c['metadata']['name']}" for c in module_claims(stack)),
            *(f"job {j['metadata']['name']}" for j in stack.jobs()),
            *(f"secret {s}" for s in secret_names(stack) if s.startswith(names.SHARED_CLAIM_PREFIX)),
            *(f"pod {p['metadata']['name']}" for p in stack.pods()),
            *(f"replicaset {rs['metadata']['name']}" for rs in stack.replica_sets()),
        }

    assert f"job {job_name(next(n for n in claims if n.startswith('ai-models-mid-')))}" in made
    assert made <= leftovers(), (made, leftovers())

    for name in ("web", "mid"):
        stack.apps.delete_namespaced_deployment(name, stack.namespace)

    stack.models.eventually(
        lambda: leftovers() == set(), timeout=30, what=lambda: f"nothing left: {leftovers()}"
    )
    assert [c["metadata"]["name"] for c in stack.claims()] == [FOREIGN_CLAIM]
    # The orphan pass, run on what is left, touches nothing: the foreign claim is not the module's.
    assert run_orphan_pass(stack) == OrphanPassResult()
    assert [c["metadata"]["name"] for c in stack.claims()] == [FOREIGN_CLAIM]


def test_the_orphan_pass_deletes_a_claim_only_its_own_job_mounts_and_never_a_foreign_one(
    stack: DeliveryStack,
) -> None:
    stack.ready_model("tiny", "acme/tiny-llama")
    create_foreign_claim(stack)
    # The materialize Job stays without its Pod: it exists and mounts the claim when the pass looks.
    stack.models.runner.pause_new_pods()
    stack.apply_workload(workload_manifest("Deployment", "web", stack.namespace))
    stack.models.eventually(
        lambda: len(stack.jobs()) == 1 and len(module_claims(stack)) == 1,
        timeout=30,
        what=lambda: f"the claim and its Job\n{stack.describe()}",
    )
    [claim] = module_claims(stack)
    [job] = stack.jobs()
    name = claim["metadata"]["name"]
    assert name in template_claims(job["spec"]["template"])
    assert [ref["uid"] for ref in job["metadata"]["ownerReferences"]] == [claim["metadata"]["uid"]]
    mark_unreferenced_long_ago(stack, name)
    web = stack.workload("Deployment", "web")

    # The workload exists: its claim is kept, and so is the mark, which is the workload's reconcile's
    # while the workload exists (D100: the orphan pass removing it would restart its grace).
    assert run_orphan_pass(stack) == OrphanPassResult()
    assert claim_mark(stack, name) == LONG_AGO

    # The Deployment and its Pods gone, the claim not collected: only the claim's own Job mounts
    # it, which is no reference (D97).
    pods = stack.pods(selector="app=web")
    assert pods, "the gated pods exist"
    vanish(stack, "apps/v1", "Deployment", web["metadata"]["name"])
    for replica_set in owned_replica_sets(stack, "web"):
        vanish(stack, "apps/v1", "ReplicaSet", replica_set["metadata"]["name"])
    for pod in pods:
        vanish(stack, "v1", "Pod", pod["metadata"]["name"])
    gone = run_orphan_pass(stack)
    assert gone.deleted == [f"{stack.namespace}/{name}"]
    assert FOREIGN_CLAIM in {c["metadata"]["name"] for c in stack.claims()}
    assert name not in {c["metadata"]["name"] for c in stack.claims()}
