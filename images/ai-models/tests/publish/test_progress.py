"""Progress: a percentage on the owner's status, throttled, never 100%, never fatal; patched into
a real Kubernetes API (the emulator over HTTPS)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client as k8s

from ai_models.domain.storage.ledger import Owner
from ai_models.names import API_GROUP, API_VERSION
from ai_models.publish.main import EXIT_PUBLISHED
from ai_models.publish.progress import Progress, kube_reporter, percent
from fakes.hub import FakeHub, repository
from fakes.model_files import MIB, synthetic_safetensors
from kubeemu.pytest_fixtures import RunningEmulator

if TYPE_CHECKING:
    from publish.conftest import Kit

PROGRESS = r"^(100|[1-9]?[0-9])%$"


class Recorder:
    def __init__(self, then: Callable[[str], None] | None = None, *, failures: int = 0) -> None:
        self.values: list[tuple[float, str]] = []
        self._then = then
        self._failures = failures
        self._lock = threading.Lock()

    def __call__(self, value: str) -> None:
        with self._lock:
            if self._failures:
                self._failures -= 1
                raise RuntimeError("the API is down")
            self.values.append((time.monotonic(), value))
        if self._then is not None:
            self._then(value)

    @property
    def reported(self) -> list[str]:
        return [value for _, value in self.values]


def test_percent_is_whole_and_stops_short_of_100() -> None:
    assert percent(0, 1000) == 0
    assert percent(999, 1000) == 99
    assert percent(1000, 1000) == 99
    assert percent(5000, 1000) == 99
    assert percent(10, 0) == 0


def test_only_changed_percentages_are_reported_at_most_once_per_interval() -> None:
    recorder = Recorder()
    interval = 0.1
    with Progress(total=1000, report=recorder, interval=interval) as progress:
        started = time.monotonic()
        for _ in range(10):
            progress.add(50)
            time.sleep(interval * 0.8)
        time.sleep(interval * 3)  # nothing new: nothing more is sent
        elapsed = time.monotonic() - started
    values = recorder.reported
    assert values[-1] == "50%"
    assert len(values) == len(set(values))  # every report is a change
    assert [int(value[:-1]) for value in values] == sorted(int(value[:-1]) for value in values)
    assert len(values) <= elapsed / interval + 1
    gaps = [
        later - earlier
        for (earlier, _), (later, _) in zip(recorder.values, recorder.values[1:], strict=False)
    ]
    assert all(gap >= interval * 0.9 for gap in gaps)


def test_a_failing_report_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(failures=2)
    caplog.set_level(logging.WARNING, logger="ai_models.publish.progress")
    with Progress(total=100, report=recorder, interval=0.02) as progress:
        progress.add(40)
        deadline = time.monotonic() + 5
        while not recorder.reported and time.monotonic() < deadline:
            time.sleep(0.01)
    assert recorder.reported == ["40%"]
    warnings = [record for record in caplog.records if record.getMessage() == "cannot report progress"]
    assert len(warnings) == 2
    assert "the API is down" in warnings[0].__dict__["error"]


def test_nothing_is_reported_before_the_total_is_known() -> None:
    recorder = Recorder()
    with Progress(total=0, report=recorder, interval=0.01) as progress:
        time.sleep(0.1)
        progress.total = 10
        progress.add(5)
        time.sleep(0.1)
    assert recorder.reported == ["50%"]


def create_owner(api: Any, kind: str) -> Owner:
    objects = k8s.CustomObjectsApi(api)
    source = {"url": "https://huggingface.co/acme/tiny-llama"}
    if kind == "Model":
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": "team-a"}})
        body = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "Model",
            "metadata": {"name": "tiny"},
            "spec": {"source": source},
        }
        created = objects.create_namespaced_custom_object(API_GROUP, API_VERSION, "team-a", "models", body)
    else:
        body = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": "ClusterModel",
            "metadata": {"name": "shared"},
            "spec": {"source": source},
        }
        created = objects.create_cluster_custom_object(API_GROUP, API_VERSION, "clustermodels", body)
    meta = created["metadata"]
    return Owner(kind=kind, namespace=meta.get("namespace") or "", name=meta["name"], uid=meta["uid"])


def read_status(api: Any, owner: Owner) -> dict[str, Any]:
    objects = k8s.CustomObjectsApi(api)
    if owner.namespace:
        body = objects.get_namespaced_custom_object(
            API_GROUP, API_VERSION, owner.namespace, "models", owner.name
        )
    else:
        body = objects.get_cluster_custom_object(API_GROUP, API_VERSION, "clustermodels", owner.name)
    status: dict[str, Any] = body.get("status") or {}
    return status


@pytest.fixture
def kubeconfig(kube_emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch) -> RunningEmulator:
    """The publisher's Kubernetes client reaches the emulator, as a Job's would reach its cluster."""
    monkeypatch.setenv("KUBECONFIG", str(kube_emulator.kubeconfig()))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return kube_emulator


@pytest.mark.parametrize("kind", ["Model", "ClusterModel"])
def test_progress_is_patched_into_the_owner_status(
    kit: Kit, hub: FakeHub, kubeconfig: RunningEmulator, kind: str
) -> None:
    api = kubeconfig.api_client()
    owner = create_owner(api, kind)
    shards = {
        f"model-0000{n}-of-00004.safetensors": synthetic_safetensors(2 * MIB, seed=n) for n in range(1, 5)
    }
    hub.add(repository("acme/tiny-llama", {**shards, "config.json": b"{}"}))
    job = kit.plan(hub, "acme/tiny-llama")
    hub.set_latency(0.25)  # each file takes a while, so several reports happen
    patch = kube_reporter(owner)
    assert patch is not None
    landed: list[str] = []

    def patch_and_read(value: str) -> None:
        patch(value)
        landed.append(str(read_status(api, owner).get("progress")))

    recorder = Recorder(patch_and_read)
    settings = kit.hf_settings(hub, job, owner=owner, report_progress=True)

    assert kit.run(settings, report=recorder, interval=0.1) == EXIT_PUBLISHED

    assert len(recorder.reported) >= 2
    assert landed == recorder.reported  # each report is in the object's status as sent
    assert all(re.match(PROGRESS, value) and value != "100%" for value in landed)
    assert read_status(api, owner)["progress"] == recorder.reported[-1]


def test_a_failing_patch_does_not_fail_the_publication(
    kit: Kit, hub: FakeHub, kubeconfig: RunningEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    hub.add(repository("acme/tiny-llama", {"model.safetensors": synthetic_safetensors(MIB, seed=3)}))
    job = kit.plan(hub, "acme/tiny-llama")
    hub.set_latency(0.3)
    caplog.set_level(logging.WARNING, logger="ai_models.publish.progress")
    # The publisher's own reporter (KUBECONFIG); the Model it patches does not exist.
    settings = kit.hf_settings(hub, job, report_progress=True)

    assert kit.run(settings, interval=0.05) == EXIT_PUBLISHED

    warnings = [record for record in caplog.records if record.getMessage() == "cannot report progress"]
    assert warnings
    assert "404" in warnings[0].__dict__["error"] or "Not Found" in warnings[0].__dict__["error"]
    assert kit.outcome(settings)["reason"] == "ArtifactPublished"


def test_without_a_kubernetes_client_the_publication_goes_on(
    kit: Kit, hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    hub.add(repository("acme/tiny-llama", {"model.safetensors": synthetic_safetensors(MIB, seed=3)}))
    job = kit.plan(hub, "acme/tiny-llama")
    caplog.set_level(logging.WARNING, logger="ai_models.publish.progress")

    assert kit.run(kit.hf_settings(hub, job, report_progress=True)) == EXIT_PUBLISHED

    assert any(
        record.getMessage() == "progress is not reported: no Kubernetes client" for record in caplog.records
    )
