"""The one controller runtime: workers, per-key backoff, requeue, informer wiring and the manager."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import SECRETS
from ai_models.controller.runtime import Backoff, Controller, Manager
from support.eventually import eventually

WAIT = 10.0  # bound for "promptly"; every wait ends as soon as the awaited thing happens
NAMESPACE = "runtime-test"


class Calls:
    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.times: list[float] = []
        self.condition = threading.Condition()

    def record(self, key: Any) -> int:
        with self.condition:
            self.keys.append(key)
            self.times.append(time.monotonic())
            self.condition.notify_all()
            return self.keys.count(key)

    def wait(self, predicate: Any) -> None:
        with self.condition:
            assert self.condition.wait_for(predicate, timeout=WAIT), self.keys


@pytest.fixture
def controllers() -> Iterator[list[Controller[Any]]]:
    started: list[Controller[Any]] = []
    yield started
    for controller in started:
        controller.stop()
        assert controller.join(WAIT)


def test_a_failing_key_backs_off_alone_while_the_others_go_on(
    controllers: list[Controller[Any]], caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()

    def reconcile(key: str) -> float | None:
        if calls.record(key) <= 2 and key == "bad":
            raise RuntimeError("object store unreachable")
        return None

    controller: Controller[str] = Controller(
        "backoff", reconcile, workers=2, backoff=Backoff(base=0.05, cap=1.0)
    )
    controllers.append(controller)
    with caplog.at_level(logging.ERROR, logger="ai_models.controller.runtime.controller"):
        controller.start()
        controller.enqueue("bad")
        controller.enqueue("good")
        calls.wait(lambda: calls.keys.count("bad") == 3 and "good" in calls.keys)
    bad = [at for key, at in zip(calls.keys, calls.times, strict=True) if key == "bad"]
    assert bad[1] - bad[0] >= 0.05
    assert bad[2] - bad[1] >= 0.1
    assert controller.queue.failures("bad") == 0  # the third pass succeeded: backoff forgotten
    records = [r for r in caplog.records if r.name == "ai_models.controller.runtime.controller"]
    assert [getattr(r, "object", None) for r in records] == ["bad", "bad"]
    assert all(isinstance(r.exc_info[1], RuntimeError) for r in records if r.exc_info)


def test_the_delay_a_pass_returns_looks_at_the_key_again_after_it(
    controllers: list[Controller[Any]],
) -> None:
    calls = Calls()

    def reconcile(key: str) -> float | None:
        return 0.05 if calls.record(key) == 1 else None

    controller: Controller[str] = Controller("again", reconcile)
    controllers.append(controller)
    controller.start()
    controller.enqueue("a")
    calls.wait(lambda: len(calls.keys) == 2)
    assert calls.times[1] - calls.times[0] >= 0.05


def test_workers_are_named_and_end_when_the_controller_stops() -> None:
    controller: Controller[str] = Controller("models", lambda key: None, workers=3)
    controller.start()
    names = sorted(t.name for t in threading.enumerate() if t.name.startswith("models-"))
    assert names == ["models-0", "models-1", "models-2"]
    controller.stop()
    assert controller.stopping.is_set()
    assert controller.join(WAIT)
    assert not [t for t in threading.enumerate() if t.name.startswith("models-")]


def test_the_manager_feeds_informer_changes_to_the_controller_and_stops_everything(
    kube_api_client: Any,
) -> None:
    core = k8s.CoreV1Api(kube_api_client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "before"}})
    calls = Calls()
    informer = Informer(
        kube_api_client,
        SECRETS,
        namespace=NAMESPACE,
        indexers={"team": lambda obj: [(obj["metadata"].get("labels") or {}).get("team", "none")]},
    )

    def reconcile(key: tuple[str, str]) -> float | None:
        calls.record(key)
        return None

    controller: Controller[tuple[str, str]] = Controller("secrets", reconcile)
    controller.watch(informer, lambda obj: [(obj["metadata"]["namespace"], obj["metadata"]["name"])])
    manager = Manager()
    manager.informer(informer)
    manager.controller(controller)
    looped = threading.Event()

    def side_loop(stop: threading.Event) -> None:
        looped.set()
        stop.wait()

    manager.loop("side-loop", side_loop)
    stop = threading.Event()
    running = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    running.start()
    try:
        calls.wait(lambda: (NAMESPACE, "before") in calls.keys)
        core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "after", "labels": {"team": "a"}}})
        calls.wait(lambda: (NAMESPACE, "after") in calls.keys)
        assert looped.wait(WAIT)
        assert [obj["metadata"]["name"] for obj in informer.by_index("team", "a")] == ["after"]
        core.patch_namespaced_secret("after", NAMESPACE, {"metadata": {"labels": {"team": "b"}}})
        eventually(lambda: not informer.by_index("team", "a"), timeout=WAIT, message="the index to move")
        assert [obj["metadata"]["name"] for obj in informer.by_index("team", "b")] == ["after"]
        copy = informer.get(NAMESPACE, "after")
        assert copy is not None
        assert copy["kind"] == "Secret"
        copy["metadata"]["name"] = "changed by the caller"
        assert informer.get(NAMESPACE, "after")["metadata"]["name"] == "after"  # type: ignore[index]
    finally:
        stop.set()
        running.join(WAIT)
    assert not running.is_alive()
    assert controller.stopping.is_set()
