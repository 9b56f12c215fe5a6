"""Controller metrics (prometheus-client); names are part of the monitoring contract."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from ai_models.names import (
    CATALOG_INDEXED_MODELS_METRIC,
    CATALOG_INDEXING_METRIC,
    CATALOG_LAST_SUCCESS_METRIC,
    CATALOG_SYNC_FAILING_METRIC,
    CATALOG_SYNC_FAILURES_METRIC,
    CONTROLLER_LEADER_METRIC,
)


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            CONTROLLER_LEADER_METRIC,
            "1 while this replica holds the controller Lease.",
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
