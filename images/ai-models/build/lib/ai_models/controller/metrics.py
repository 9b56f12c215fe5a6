"""Controller metrics (prometheus-client); names are part of the monitoring contract."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            "d8_ai_models_controller_leader",
            "1 while this replica holds the controller Lease.",
            registry=registry,
        )
        self.catalog_indexed_models = Gauge(
            "d8_ai_models_catalog_source_indexed_models",
            "Models in the generation a catalog source serves.",
            ["source"],
            registry=registry,
        )
        self.catalog_last_success = Gauge(
            "d8_ai_models_catalog_source_last_successful_sync_timestamp_seconds",
            "When a catalog source last completed an indexing pass.",
            ["source"],
            registry=registry,
        )
        self.catalog_indexing = Gauge(
            "d8_ai_models_catalog_source_indexing",
            "1 while a catalog source is being indexed.",
            ["source"],
            registry=registry,
        )
        self.catalog_sync_failing = Gauge(
            "d8_ai_models_catalog_source_sync_failing",
            "1 while the last indexing pass of a catalog source failed.",
            ["source"],
            registry=registry,
        )
        self.catalog_sync_failures = Counter(
            "d8_ai_models_catalog_source_sync_failures",
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
