"""SharedPVC delivery end to end, around materialization and the bound claim (issue 12 "Proof"):
the cluster-wide materialization slots, a copy cut by a killed Job and by the serving API going
away, a materialization that fails for good and comes back once its cause is fixed, a lost volume,
and a model losing Ready while its workload runs on the claim.

What must hold at every moment is checked at every watch event, in the emulator's store (a
subscription: called under the store lock for each write, before the next write can happen), so a
state that lasted one event cannot slip between two polls.

Tests that restart the api or need another controller setting take a stack of their own
(`own_stack`); the others share one (D118), each in a namespace of its own (`stack.namespace`)."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ai_models import names
from ai_models.domain.delivery.claim_layout import staging_dir
from ai_models.domain.delivery.materialization import MaterializationOutcome
from cluster.delivery_stack import (
    DeliveryStack,
    delivery_stack,
    deployment,
    fresh_namespace,
    shared_delivery_stack,
)
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator
from kubeemu.store import WatchEvent
from support.tcpproxy import TcpProxy
from testbed.jobrunner import finished

MIB = 1024 * 1024
DeliveryReason = names.DeliveryReason


def llama_files(*, vocab: int, hidden: int) -> dict[str, bytes]:
    config = (
        f'{{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": {hidden}, '
        f'"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": {vocab}, '
        '"torch_dtype": "bfloat16"}'
    ).encode()
    weights = safetensors_bytes(
        {"model.embed_tokens.weight": ("BF16", (vocab, hidden)), "lm_head.weight": ("BF16", (vocab, hidden))}
    )
    return {"config.json": config, "model.safetensors": weights, "tokenizer.json": b'{"version": "1.0"}'}


SMALL_FILES = llama_files(vocab=256, hidden=64)
# 8 MiB of weights: through a slowed store a copy takes seconds, long enough to be cut midway.
LARGE_FILES = llama_files(vocab=1024, hidden=2048)
TINY = repository("acme/tiny-llama", SMALL_FILES)
LARGE = repository("acme/large-llama", LARGE_FILES)


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [TINY, LARGE]


# The shared controller's slots: the ten-workload proof needs 2; one at a time suits the others.
SHARED_CONTROLLER_ENV = {"AI_MODELS_DELIVERY_MAX_CONCURRENT_MATERIALIZATIONS": "2"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeliveryStack]:
    workdir = tmp_path_factory.mktemp("delivery-materialization")
    with shared_delivery_stack(workdir, [TINY, LARGE], controller_env=SHARED_CONTROLLER_ENV) as stack:
        yield stack


@pytest.fixture
def stack(shared: DeliveryStack) -> Iterator[DeliveryStack]:
    yield from fresh_namespace(shared)


@pytest.fixture
def own_stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[DeliveryStack]:
    """A pristine stack, its api and controller not started: for a test that starts them its way."""
    yield from delivery_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def digests(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def gated(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def is_materialization(obj: Mapping[str, Any]) -> bool:
    return (meta(obj).get("labels") or {}).get(names.COMPONENT_LABEL) == names.MATERIALIZATION_COMPONENT


# ----- watching the store --------------------------------------------------------------------------


class StoreFeed:
    """Calls `handle` for the current objects of one resource type and then for every change, in
    the writer's thread under the store lock (so `handle` sees the cluster exactly as that write
    left it). What `handle` raises is kept in `errors`, never thrown at the writer."""

    def __init__(
        self, stack: DeliveryStack, group: str, plural: str, handle: Callable[[WatchEvent], None]
    ) -> None:
        cluster = stack.emulator.cluster
        rtype = cluster.resource(group, "v1", plural)
        assert rtype is not None, plural
        self._store = cluster.store
        self._key = rtype.storage_key
        self._handle = handle
        self.errors: list[str] = []
        with self._store.lock:
            initial, _ = self._store.subscribe(self._key, self, since=None)
            for event in initial:
                self.offer(event)

    def offer(self, event: WatchEvent) -> None:
        try:
            self._handle(event)
        except Exception as error:  # a check that breaks must fail the test, not the emulator
            self.errors.append(f"{type(error).__name__}: {error}")

    def close(self) -> None:
        self._store.unsubscribe(self._key, self)


@contextlib.contextmanager
def watching(
    stack: DeliveryStack, group: str, plural: str, handle: Callable[[WatchEvent], None]
) -> Iterator[StoreFeed]:
    feed = StoreFeed(stack, group, plural, handle)
    try:
        yield feed
    finally:
        feed.close()
    assert not feed.errors, feed.errors


class UngatedPodsCheck:
    """At every Pod event: a workload Pod (of the stack's namespace) without the scheduling gate must
    see, under its model's mount, every file with its sha256 (a Pod is never let start on a partial
    copy)."""

    def __init__(self, stack: DeliveryStack, *, app: str, model: str, files: Mapping[str, bytes]) -> None:
        self.stack = stack
        self.app = app
        self.model = model
        self.wanted = digests(files)
        self.checked = 0
        self.violations: list[str] = []

    def __call__(self, event: WatchEvent) -> None:
        pod = event.obj
        if (
            event.type == "DELETED"
            or meta(pod).get("namespace") != self.stack.namespace
            or (meta(pod).get("labels") or {}).get("app") != self.app
            or gated(pod)
        ):
            return
        self.checked += 1
        seen = self.stack.delivered_files(pod, self.model)
        if seen != self.wanted:
            self.violations.append(
                f"{event.type} of ungated pod {meta(pod).get('name')} sees {sorted(seen.items())}"
            )


# ----- a slow object store -------------------------------------------------------------------------


def wait_ungated(stack: DeliveryStack, app: str) -> dict[str, Any]:
    stack.models.eventually(
        lambda: any(not gated(pod) for pod in stack.pods(selector=f"app={app}")),
        timeout=60,
        what=lambda: f"a pod of {app} ungated: {stack.describe()}",
    )
    return next(pod for pod in stack.pods(selector=f"app={app}") if not gated(pod))


def the_claim(stack: DeliveryStack, app: str) -> dict[str, Any]:
    stack.models.eventually(
        lambda: any(c.get("status", {}).get("phase") == "Bound" for c in owned_claims(stack, app)),
        timeout=60,
        what=lambda: f"the claim of {app} bound: {stack.describe()}",
    )
    [claim] = owned_claims(stack, app)
    return claim


def owned_claims(stack: DeliveryStack, app: str) -> list[dict[str, Any]]:
    return [
        claim
        for claim in stack.claims()
        if any(ref.get("name") == app for ref in meta(claim).get("ownerReferences") or [])
    ]


def artifact_key(stack: DeliveryStack, model: str, path: str) -> str:
    prefix = f"artifacts/namespaced/{stack.namespace}/{model}/"
    return next(key for key in stack.models.keys(prefix) if key.endswith(f"files/{path}"))


def put_object(stack: DeliveryStack, key: str, body: bytes) -> None:
    stack.models.s3().put_object(Bucket=stack.models.bucket.name, Key=key, Body=body)


def get_object(stack: DeliveryStack, key: str) -> bytes:
    body: bytes = stack.models.s3().get_object(Bucket=stack.models.bucket.name, Key=key)["Body"].read()
    return body


def delete(stack: DeliveryStack, path: str) -> None:
    status, _, body = stack.emulator.request("DELETE", path)
    assert status in (200, 202), (path, status, body)


def pod_template_claims(stack: DeliveryStack, app: str) -> list[str]:
    spec = stack.workload("Deployment", app)["spec"]["template"]["spec"]
    return [
        str(volume["persistentVolumeClaim"]["claimName"])
        for volume in spec.get("volumes") or []
        if "persistentVolumeClaim" in volume
    ]


# ----- the proofs ----------------------------------------------------------------------------------


def test_ten_workloads_at_once_never_run_more_materializations_than_the_slots(stack: DeliveryStack) -> None:
    # The shared controller has 2 slots (SHARED_CONTROLLER_ENV).
    stack.ready_model("tiny", "acme/tiny-llama")
    # The slots are the cluster's: every namespace's Jobs count; the test's own are `jobs`.
    unfinished: dict[str, bool] = {}  # materialize Job uid -> not finished
    jobs: set[str] = set()
    counts: list[int] = []
    waiting: dict[str, str] = {}

    def on_job(event: WatchEvent) -> None:
        if not is_materialization(event.obj):
            return
        uid = str(meta(event.obj).get("uid"))
        if meta(event.obj).get("namespace") == stack.namespace:
            jobs.add(uid)
        if event.type == "DELETED":
            unfinished.pop(uid, None)
        else:
            unfinished[uid] = not finished(event.obj)
        counts.append(sum(unfinished.values()))

    def on_deployment(event: WatchEvent) -> None:
        if meta(event.obj).get("namespace") != stack.namespace:
            return
        annotations = meta(event.obj).get("annotations") or {}
        message = str(annotations.get(names.DELIVERY_MESSAGE_ANNOTATION) or "")
        if annotations.get(names.DELIVERY_REASON_ANNOTATION) == DeliveryReason.SHARED_PVC_MATERIALIZING and (
            "waiting for a materialization slot" in message
        ):
            waiting[str(meta(event.obj)["name"])] = message

    apps = [f"web-{index}" for index in range(10)]
    with watching(stack, "batch", "jobs", on_job), watching(stack, "apps", "deployments", on_deployment):
        for app in apps:
            stack.apply_workload(deployment(app, models="tiny", namespace=stack.namespace))
        for app in apps:
            stack.wait_reason("Deployment", app, DeliveryReason.DELIVERED, timeout=90)

    assert max(counts) == 2, counts
    assert len(jobs) >= len(apps), (len(jobs), counts)
    assert waiting, "no workload reported waiting for a slot"
    for app, message in waiting.items():
        assert "of 2 running in the cluster (delivery.maxConcurrentMaterializations)" in message, (
            app,
            message,
        )
        assert "tiny" in message, message
    claims = {meta(claim)["name"] for claim in stack.claims()}
    assert len(claims) == len(apps), sorted(claims)
    for app in apps:
        pod = wait_ungated(stack, app)
        assert stack.delivered_files(pod, "tiny") == digests(SMALL_FILES), app


def test_a_copy_cut_by_a_killed_job_and_by_the_api_going_away_never_starts_the_pod_on_partial_files(
    own_stack: DeliveryStack,
) -> None:
    moto_port = int(own_stack.models.bucket.server.endpoint_url.rsplit(":", 1)[1])
    slow_store = TcpProxy("127.0.0.1", moto_port, rate=1.5 * MIB).start()
    try:
        api = own_stack.models.api(AI_MODELS_S3_ENDPOINT=slow_store.url("http"))
        own_stack.controller()
        status = own_stack.ready_model("large", "acme/large-llama")
        digest = status["artifact"]["digest"]
        size = len(LARGE_FILES["model.safetensors"])
        check = UngatedPodsCheck(own_stack, app="web", model="large", files=LARGE_FILES)
        with watching(own_stack, "", "pods", check):
            own_stack.apply_workload(deployment("web", models="large"))
            claim = meta(the_claim(own_stack, "web"))["name"]
            directory = own_stack.simulation.volumes.volume_directory(claim, own_stack.namespace)
            partial = directory / staging_dir(digest) / "model.safetensors"

            def copied() -> int:
                return partial.stat().st_size if partial.exists() else 0

            def wait_copied(at_least: int, what: str) -> None:
                own_stack.models.eventually(
                    lambda: copied() >= at_least,
                    timeout=40,
                    what=lambda: f"{what}: {copied()} of {size} bytes in staging; {own_stack.describe()}",
                )

            runner = own_stack.models.runner
            wait_copied(MIB, "the first Job midway")
            killed = runner.kill(claim, own_stack.namespace)
            at_kill = copied()
            assert at_kill < size, "the copy finished before the Job was killed"
            assert own_stack.report("Deployment", "web")[0] != DeliveryReason.DELIVERED
            # The check is not vacuous: the workload's pod, were it ungated now, would be caught.
            [waiting] = own_stack.pods(selector="app=web")
            probe = UngatedPodsCheck(own_stack, app="web", model="large", files=LARGE_FILES)
            probe(WatchEvent("MODIFIED", 0, {**waiting, "spec": {**waiting["spec"], "schedulingGates": []}}))
            assert probe.violations, "a partial copy passed the check"

            wait_copied(at_kill + MIB, "a new Pod of the Job continuing the copy")
            assert [pod for pod in runner.pods(claim, own_stack.namespace) if meta(pod)["name"] != killed]
            api.kill()
            at_outage = copied()
            assert at_outage < size, "the copy finished before the api went away"
            time.sleep(1)  # the copy is cut: the materializer retries against a closed port
            assert own_stack.report("Deployment", "web")[0] != DeliveryReason.DELIVERED
            own_stack.models.api(AI_MODELS_S3_ENDPOINT=slow_store.url("http"))
            slow_store.rate = None

            own_stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
            pod = wait_ungated(own_stack, "web")
        assert check.checked >= 1, "no ungated pod was seen"
        assert not check.violations, check.violations
        assert own_stack.delivered_files(pod, "large") == digests(LARGE_FILES)
    finally:
        slow_store.stop()


def test_a_materialization_failing_for_good_reports_the_materializers_message_and_recovers_once_fixed(
    stack: DeliveryStack,
) -> None:
    stack.ready_model("tiny", "acme/tiny-llama")
    key = artifact_key(stack, "tiny", "model.safetensors")
    original = get_object(stack, key)
    # Same size, other bytes: the manifest's sha256 no longer matches. The bytes carry a text that
    # must never reach the report (the materializer reports in its own words).
    marker = b"REMOTE-BYTES-MUST-NOT-BE-REPORTED "
    put_object(stack, key, (marker * (len(original) // len(marker) + 1))[: len(original)])

    outcomes: list[str] = []
    failed_at: dict[str, float] = {}  # Job uid -> when it was seen failed
    created_at: dict[str, float] = {}

    def mine(event: WatchEvent) -> bool:
        return is_materialization(event.obj) and meta(event.obj).get("namespace") == stack.namespace

    def on_pod(event: WatchEvent) -> None:
        if not mine(event) or event.type == "DELETED":
            return
        for status in (event.obj.get("status") or {}).get("containerStatuses") or []:
            message = ((status.get("state") or {}).get("terminated") or {}).get("message")
            if message and message not in outcomes:
                outcomes.append(message)

    def on_job(event: WatchEvent) -> None:
        if not mine(event) or event.type == "DELETED":
            return
        uid = str(meta(event.obj)["uid"])
        created_at.setdefault(uid, time.monotonic())
        if finished(event.obj):
            failed_at.setdefault(uid, time.monotonic())

    check = UngatedPodsCheck(stack, app="web", model="tiny", files=SMALL_FILES)
    with (
        watching(stack, "", "pods", check),
        watching(stack, "", "pods", on_pod),
        watching(stack, "batch", "jobs", on_job),
    ):
        stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
        message = stack.wait_reason("Deployment", "web", DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED)
        assert "does not match the sha256 its manifest records" in message, message
        assert "REMOTE-BYTES" not in message, message
        [outcome] = {MaterializationOutcome.from_json(text) for text in outcomes} - {None}
        assert outcome is not None
        assert not outcome.succeeded, outcome
        assert not outcome.retryable, outcome
        assert outcome.message in message, (outcome.message, message)
        assert "the module tries again at" in message or "trying again now" in message, message

        # Still damaged: the retry fails the same way, and only after the retry period.
        stack.models.eventually(
            lambda: len(created_at) >= 2, timeout=30, what=lambda: f"a second Job: {stack.describe()}"
        )
        first, second = sorted(created_at, key=created_at.__getitem__)[:2]
        # The period counts from the failure's condition time, which has whole seconds only.
        assert created_at[second] - failed_at[first] >= 1.0, (created_at, failed_at)
        assert not any(not gated(pod) for pod in stack.pods(selector="app=web"))

        put_object(stack, key, original)
        stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
        pod = wait_ungated(stack, "web")
    assert check.checked >= 1
    assert not check.violations, check.violations
    assert stack.delivered_files(pod, "tiny") == digests(SMALL_FILES)


def test_a_lost_volume_is_reported_and_a_deleted_claim_is_made_and_filled_again(stack: DeliveryStack) -> None:
    stack.ready_model("tiny", "acme/tiny-llama")
    stack.apply_workload(deployment("web", models="tiny", namespace=stack.namespace))
    stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
    claim = the_claim(stack, "web")
    name, uid, volume = meta(claim)["name"], meta(claim)["uid"], claim["spec"]["volumeName"]

    delete(stack, f"/api/v1/persistentvolumes/{volume}")
    message = stack.wait_reason("Deployment", "web", DeliveryReason.SHARED_PVC_VOLUME_LOST)
    assert f"lost its PersistentVolume {volume}" in message, message
    assert f"delete the claim (kubectl -n {stack.namespace} delete pvc {name})" in message, message

    delete(stack, f"/api/v1/namespaces/{stack.namespace}/persistentvolumeclaims/{name}")
    stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
    again = the_claim(stack, "web")
    assert meta(again)["name"] == name
    assert meta(again)["uid"] != uid
    assert again["spec"]["volumeName"] != volume
    assert meta(again)["annotations"][names.MATERIALIZED_DIGESTS_ANNOTATION]
    pod = wait_ungated(stack, "web")
    assert stack.delivered_files(pod, "tiny") == digests(SMALL_FILES)


def test_a_model_losing_ready_keeps_the_bound_claim_its_files_and_the_running_pods(
    own_stack: DeliveryStack,
) -> None:
    own_stack.api()
    own_stack.controller(AI_MODELS_INVENTORY_INTERVAL_SECONDS="2")
    own_stack.ready_model("tiny", "acme/tiny-llama")
    own_stack.apply_workload(deployment("web", models="tiny"))
    own_stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
    pod = wait_ungated(own_stack, "web")
    own_stack.models.eventually(
        lambda: any(p["status"].get("phase") == "Running" for p in own_stack.pods(selector="app=web")),
        timeout=30,
        what=lambda: f"the pod running: {own_stack.describe()}",
    )
    claim = the_claim(own_stack, "web")
    replica_sets = sorted(meta(rs)["name"] for rs in own_stack.replica_sets())
    assert pod_template_claims(own_stack, "web") == [meta(claim)["name"]]

    # The inventory finds the artifact damaged and the Model is published again; its Job gets no
    # Pod meanwhile, so the Model stays not Ready.
    own_stack.models.runner.pause_new_pods()
    key = artifact_key(own_stack, "tiny", "model.safetensors")
    put_object(own_stack, key, b"\1" * len(get_object(own_stack, key)))
    message = own_stack.wait_reason("Deployment", "web", DeliveryReason.MODEL_NOT_READY, timeout=60)
    assert "not Ready" in message, message
    assert own_stack.models.status("tiny").get("phase") != "Ready"
    digest = own_stack.models.status("tiny")["artifact"]["digest"]

    [kept] = owned_claims(own_stack, "web")
    assert meta(kept)["uid"] == meta(claim)["uid"]
    assert kept["status"]["phase"] == "Bound"
    assert kept["spec"]["volumeName"] == claim["spec"]["volumeName"]
    assert pod_template_claims(own_stack, "web") == [meta(claim)["name"]]
    assert sorted(meta(rs)["name"] for rs in own_stack.replica_sets()) == replica_sets
    [running] = own_stack.pods(selector="app=web")
    assert meta(running)["uid"] == meta(pod)["uid"]
    assert running["status"]["phase"] == "Running"
    assert not meta(running).get("deletionTimestamp")
    assert own_stack.delivered_files(running, "tiny") == digests(SMALL_FILES)

    # Published again (the same files, the same artifact): delivered from the same claim.
    own_stack.models.runner.resume()
    own_stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
    assert own_stack.models.status("tiny")["artifact"]["digest"] == digest
    [same] = owned_claims(own_stack, "web")
    assert meta(same)["uid"] == meta(claim)["uid"]
    assert sorted(meta(rs)["name"] for rs in own_stack.replica_sets()) == replica_sets
    [still] = own_stack.pods(selector="app=web")
    assert meta(still)["uid"] == meta(pod)["uid"]


def test_a_job_left_by_an_earlier_claim_of_the_same_name_never_counts_for_the_new_claim(
    stack: DeliveryStack,
) -> None:
    slow_store = stack.api_store
    assert slow_store is not None
    digest = stack.ready_model("large", "acme/large-llama")["artifact"]["digest"]
    slow_store.rate = 1.5 * MIB  # the api serves the copy slowly (set back after the test)
    check = UngatedPodsCheck(stack, app="web", model="large", files=LARGE_FILES)
    with watching(stack, "", "pods", check):
        stack.apply_workload(deployment("web", models="large", namespace=stack.namespace))
        claim = the_claim(stack, "web")
        name, uid = meta(claim)["name"], meta(claim)["uid"]
        partial = (
            stack.simulation.volumes.volume_directory(name, stack.namespace)
            / staging_dir(digest)
            / "model.safetensors"
        )
        stack.models.eventually(
            lambda: partial.exists() and partial.stat().st_size >= MIB,
            timeout=40,
            what=lambda: f"the copy midway: {stack.describe()}",
        )
        # The claim goes while its Job copies: the Job is left behind, as it is in a cluster
        # until the garbage collector reaches it (here: orphaned, the test plays the collector).
        status, _, body = stack.emulator.request(
            "DELETE",
            f"/api/v1/namespaces/{stack.namespace}/persistentvolumeclaims/{name}",
            body={"propagationPolicy": "Orphan"},
        )
        assert status in (200, 202), (status, body)
        stack.models.eventually(
            lambda: any(meta(c)["uid"] != uid for c in owned_claims(stack, "web")),
            timeout=30,
            what=lambda: f"a new claim made: {stack.describe()}",
        )
        slow_store.rate = None
        stack.models.runner.wait_for_job(name, stack.namespace, "Complete", timeout=40)
        time.sleep(2)  # the controller sees the left-behind Job finished
        # Gone already when the controller removed it itself, as a Job of this claim.
        stack.emulator.request("DELETE", f"/apis/batch/v1/namespaces/{stack.namespace}/jobs/{name}")
        stack.wait_reason("Deployment", "web", DeliveryReason.DELIVERED, timeout=60)
        pod = wait_ungated(stack, "web")
    assert not check.violations, check.violations
    assert stack.delivered_files(pod, "large") == digests(LARGE_FILES)
