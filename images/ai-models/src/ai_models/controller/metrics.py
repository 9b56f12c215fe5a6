"""Controller metrics (prometheus-client); names are part of the monitoring contract.

`ControllerMetrics` is also the observer of the controller runtime (`runtime/observer.py`): the
work queues and reconciles of every controller, and the admission webhook's durations; and its
`kubernetes_requests` counts every request the process sends to the API server.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ai_models.adapters.kube.request_counting import RequestObserver, request_counter
from ai_models.names import (
    CATALOG_INDEXED_MODELS_METRIC,
    CATALOG_INDEXING_METRIC,
    CATALOG_LAST_SUCCESS_METRIC,
    CATALOG_SYNC_FAILING_METRIC,
    CATALOG_SYNC_FAILURES_METRIC,
    CONTROLLER_ADMISSION_DURATION_METRIC,
    CONTROLLER_KUBERNETES_REQUESTS_METRIC,
    CONTROLLER_LEADER_METRIC,
    CONTROLLER_RECONCILE_DURATION_METRIC,
    CONTROLLER_RECONCILE_METRIC,
    CONTROLLER_WORKQUEUE_ADDS_METRIC,
    CONTROLLER_WORKQUEUE_DEPTH_METRIC,
    CONTROLLER_WORKQUEUE_RETRIES_METRIC,
)

# Reconciles range from a cache read (a millisecond) to a publication's planning against the Hub
# (tens of seconds); admissions must stay far below the API server's 10 s webhook timeout.
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ADMISSION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            CONTROLLER_LEADER_METRIC,
            "1 while this replica holds the controller Lease.",
            registry=registry,
        )
        self.kubernetes_requests: RequestObserver = request_counter(
            registry, CONTROLLER_KUBERNETES_REQUESTS_METRIC
        )
        self._workqueue_depth = Gauge(
            CONTROLLER_WORKQUEUE_DEPTH_METRIC,
            "Keys waiting in a controller's work queue.",
            ["controller"],
            registry=registry,
        )
        self._workqueue_adds = Counter(
            CONTROLLER_WORKQUEUE_ADDS_METRIC,
            "Keys that entered a controller's work queue.",
            ["controller"],
            registry=registry,
        )
        self._workqueue_retries = Counter(
            CONTROLLER_WORKQUEUE_RETRIES_METRIC,
            "Failed keys put back into a controller's work queue after their backoff.",
            ["controller"],
            registry=registry,
        )
        self._reconciles = Counter(
            CONTROLLER_RECONCILE_METRIC,
            "Reconciles by controller and result (success, error, requeue_after).",
            ["controller", "result"],
            registry=registry,
        )
        self._reconcile_duration = Histogram(
            CONTROLLER_RECONCILE_DURATION_METRIC,
            "How long one reconcile took.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        self._admission_duration = Histogram(
            CONTROLLER_ADMISSION_DURATION_METRIC,
            "How long the admission webhook took to answer one AdmissionReview.",
            ["webhook"],
            buckets=ADMISSION_BUCKETS,
            registry=registry,
        )
        self.catalog_indexed_models = Gauge(
            CATALOG_INDEXED_MODELS_METRIC,
            "Models in the generation a catalog source serves.",
            ["source"],
            registry=registry,
        )
        self.catalog_last_success = Gauge(
            CATALOG_LAST_SUCCESS_METRIC,
            "When a catalog source last completed an indexing pass.",
            ["source"],
            registry=registry,
        )
        self.catalog_indexing = Gauge(
            CATALOG_INDEXING_METRIC,
            "1 while a catalog source is being indexed.",
            ["source"],
            registry=registry,
        )
        self.catalog_sync_failing = Gauge(
            CATALOG_SYNC_FAILING_METRIC,
            "1 while the last indexing pass of a catalog source failed.",
            ["source"],
            registry=registry,
        )
        self.catalog_sync_failures = Counter(
            CATALOG_SYNC_FAILURES_METRIC,
            "Failed indexing passes by reason.",
            ["source", "reason"],
            registry=registry,
        )

    def watch_queue(self, controller: str, depth: Callable[[], int]) -> None:
        self._workqueue_depth.labels(controller).set_function(depth)
        # Present from the start, at 0, so a rate() has a first sample.
        self._workqueue_adds.labels(controller)
        self._workqueue_retries.labels(controller)

    def queue_added(self, controller: str) -> None:
        self._workqueue_adds.labels(controller).inc()

    def queue_retried(self, controller: str) -> None:
        self._workqueue_retries.labels(controller).inc()

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        self._reconciles.labels(controller, result).inc()
        self._reconcile_duration.labels(controller).observe(seconds)

    def admission_observer(self, webhook: str) -> Callable[[float], None]:
        """What the webhook server calls with each admission's duration in seconds."""
        histogram = self._admission_duration.labels(webhook)
        return histogram.observe

    def forget_source(self, source: str) -> None:
        for gauge in (
            self.catalog_indexed_models,
            self.catalog_last_success,
            self.catalog_indexing,
            self.catalog_sync_failing,
        ):
            try:
                gauge.remove(source)
            except KeyError:
                continue
