"""`publication.maxConcurrentPublications` holds however many Models arrive at once: the running
publication Jobs are counted at every watch event of Jobs, and never exceed the limit.

Eight Models applied together from one small repository once ran six Jobs against a limit of
four, and the waiting ones said "5 of 4 running": the Job cache lags the Jobs just created, and
several workers looked at it at the same moment.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import MODULE_NAMESPACE

LIMIT = 4
MODELS = [f"small-{index}" for index in range(8)]
SMALL = repository(
    "acme/small",
    {
        "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
        "model.safetensors": safetensors_bytes({"w": ("F32", (16, 16))}),
    },
)
SLOT_MESSAGE = re.compile(r"waiting for a publication slot: (\d+) of (\d+) running")


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return [SMALL]


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


def running(job: Any) -> bool:
    """As the controller counts: not Complete, not Failed, not being deleted."""
    if job.metadata.deletion_timestamp is not None:
        return False
    conditions = (job.status.conditions if job.status else None) or []
    return not any(item.status == "True" and item.type in ("Complete", "Failed") for item in conditions)


class Watcher:
    """List, then watch from the list's resourceVersion, in a thread: `listed(items)` for each list
    (a reconnect lists again, so a missed deletion cannot linger) and `seen(event)` for every event."""

    def __init__(self, list_call: Any, *, listed: Any, seen: Any, **arguments: Any) -> None:
        self._list_call = list_call
        self._listed = listed
        self._seen = seen
        self._arguments = arguments
        self._watch = watch.Watch()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-watch", daemon=True)
        self.failure: BaseException | None = None
        self.synced = threading.Event()

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stopped.is_set():
                page = self._list_call(**self._arguments)
                items = page["items"] if isinstance(page, dict) else page.items
                version = (
                    page["metadata"]["resourceVersion"]
                    if isinstance(page, dict)
                    else page.metadata.resource_version
                )
                self._listed(items)
                self.synced.set()
                for event in self._watch.stream(
                    self._list_call, resource_version=version, timeout_seconds=30, **self._arguments
                ):
                    self._seen(event)
                    if self._stopped.is_set():
                        break
        except BaseException as error:  # reported by the test, not lost in the thread
            if not self._stopped.is_set():
                self.failure = error

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()
        self._thread.join(timeout=10)


def test_eight_models_at_once_never_run_more_publications_than_the_limit(stack: ModelStack) -> None:
    api = stack.emulator.api_client()
    lock = threading.Lock()
    jobs: dict[str, bool] = {}
    most_running = [0]
    job_events = [0]
    slot_messages: list[tuple[int, int]] = []

    def count() -> None:
        most_running[0] = max(most_running[0], sum(jobs.values()))

    def jobs_listed(items: list[Any]) -> None:
        with lock:
            jobs.clear()
            jobs.update((job.metadata.name, running(job)) for job in items)
            count()

    def job_event(event: dict[str, Any]) -> None:
        job = event["object"]
        with lock:
            job_events[0] += 1
            if event["type"] == "DELETED":
                jobs.pop(job.metadata.name, None)
            else:
                jobs[job.metadata.name] = running(job)
            count()

    def models_listed(items: list[dict[str, Any]]) -> None:
        for item in items:
            slot_message(item)

    def slot_message(model: dict[str, Any]) -> None:
        for condition in (model.get("status") or {}).get("conditions") or []:
            found = SLOT_MESSAGE.search(str(condition.get("message") or ""))
            if found:
                with lock:
                    slot_messages.append((int(found.group(1)), int(found.group(2))))

    watchers = [
        Watcher(
            client.BatchV1Api(api).list_namespaced_job,
            listed=jobs_listed,
            seen=job_event,
            namespace=MODULE_NAMESPACE,
        ),
        Watcher(
            client.CustomObjectsApi(api).list_namespaced_custom_object,
            listed=models_listed,
            seen=lambda event: slot_message(event["object"]),
            group="ai.deckhouse.io",
            version="v1alpha1",
            namespace=USER_NAMESPACE,
            plural="models",
        ),
    ]
    for watcher in watchers:
        watcher.start()
    for watcher in watchers:
        assert watcher.synced.wait(30), "the test's watches did not start"
    try:
        # Enough workers that every Model is planned at the same moment.
        stack.controller(AI_MODELS_PUBLICATION_MAX_CONCURRENT=str(LIMIT), AI_MODELS_MODEL_WORKERS="8")
        for name in MODELS:
            stack.create_model(name, {"url": "https://huggingface.co/acme/small"})

        for name in MODELS:
            stack.wait_phase(name, "Ready", timeout=120)
        stack.eventually(lambda: stack.jobs() == [], what="the finished Jobs removed")
    finally:
        for watcher in watchers:
            watcher.stop()
    for watcher in watchers:
        assert watcher.failure is None, f"a watch failed: {watcher.failure!r}"

    with lock:
        assert job_events[0] >= 3 * len(MODELS)  # each Job was seen created, finished and deleted
        assert most_running[0] == LIMIT, f"{most_running[0]} publication Jobs ran at once"
        assert all(count <= limit == LIMIT for count, limit in slot_messages), slot_messages
    assert len(stack.events("PublicationStarted")) == len(MODELS)
