"""The controller's own metrics, in the operator convention: each controller's queue depth, adds
and retries, every reconcile's result and duration, and each admission's duration, under the
names and labels of the monitoring contract."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.runtime import Backoff, Controller, Manager
from ai_models.names import DELIVERY_WEBHOOK_NAME
from support.eventually import eventually

NAME = "models"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def failing_once(registry: CollectorRegistry) -> Iterator[tuple[Controller[str], threading.Event]]:
    seen: dict[str, int] = {}
    release = threading.Event()

    def reconcile(key: str) -> float | None:
        seen[key] = seen.get(key, 0) + 1
        if key == "blocked":
            release.wait(10)
            return None
        if key == "bad" and seen[key] == 1:
            raise RuntimeError("the first pass fails")
        return 3600.0 if key == "later" else None

    controller: Controller[str] = Controller(NAME, reconcile, backoff=Backoff(base=0.01, cap=0.01))
    manager = Manager(observer=ControllerMetrics(registry))
    manager.controller(controller)
    controller.start()
    try:
        yield controller, release
    finally:
        release.set()
        controller.stop()
        controller.join(5)


def test_each_reconcile_is_counted_by_result_with_its_duration(
    registry: CollectorRegistry, failing_once: tuple[Controller[str], threading.Event]
) -> None:
    controller, _ = failing_once
    for key in ("ok", "later", "bad"):
        controller.enqueue(key)
    reconciles = "d8_ai_models_controller_reconcile_total"

    def counted() -> bool:
        return (
            sample(registry, reconciles, controller=NAME, result="success") == 2  # ok, bad's second pass
            and sample(registry, reconciles, controller=NAME, result="requeue_after") == 1
            and sample(registry, reconciles, controller=NAME, result="error") == 1
        )

    eventually(counted, timeout=10, message="four reconciles counted by result")
    assert sample(registry, "d8_ai_models_controller_reconcile_duration_seconds_count", controller=NAME) == 4
    assert sample(registry, "d8_ai_models_controller_workqueue_retries_total", controller=NAME) == 1
    # ok, later, bad, and bad again after its backoff: "later" is due in an hour, not yet added.
    assert sample(registry, "d8_ai_models_controller_workqueue_adds_total", controller=NAME) == 4


def test_the_queue_depth_is_what_waits_and_a_repeated_add_is_not_an_add(
    registry: CollectorRegistry, failing_once: tuple[Controller[str], threading.Event]
) -> None:
    controller, release = failing_once
    controller.enqueue("blocked")  # the one worker is busy with it from now on
    eventually(lambda: len(controller.queue) == 0, timeout=10, message="the worker to take the key")
    for key in ("a", "b", "a", "b", "c"):
        controller.enqueue(key)
    assert sample(registry, "d8_ai_models_controller_workqueue_depth", controller=NAME) == 3
    assert sample(registry, "d8_ai_models_controller_workqueue_adds_total", controller=NAME) == 4
    release.set()
    eventually(
        lambda: sample(registry, "d8_ai_models_controller_workqueue_depth", controller=NAME) == 0,
        timeout=10,
        message="the queue to drain",
    )


def test_admissions_are_timed_per_webhook(registry: CollectorRegistry) -> None:
    observe = ControllerMetrics(registry).admission_observer(DELIVERY_WEBHOOK_NAME)
    observe(0.003)
    observe(0.2)
    labels = {"webhook": DELIVERY_WEBHOOK_NAME}
    name = "d8_ai_models_controller_admission_duration_seconds"
    assert sample(registry, f"{name}_count", **labels) == 2
    assert sample(registry, f"{name}_bucket", le="0.005", **labels) == 1
    assert sample(registry, f"{name}_sum", **labels) == pytest.approx(0.203)


def test_the_request_counter_has_the_contract_name_and_labels(registry: CollectorRegistry) -> None:
    ControllerMetrics(registry).kubernetes_requests("update", "leases", "200")
    assert (
        sample(
            registry,
            "d8_ai_models_controller_kubernetes_requests_total",
            verb="update",
            resource="leases",
            code="200",
        )
        == 1
    )
