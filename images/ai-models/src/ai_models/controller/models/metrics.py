"""Model metrics: what the leader's Model reconciler exports (the monitoring contract's names)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from ai_models.names import MODELS_METRIC, PUBLICATIONS_METRIC


class ModelMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.publications = Counter(
            PUBLICATIONS_METRIC, "Finished publications by result.", ["result"], registry=registry
        )
        self.models = Gauge(
            MODELS_METRIC,
            "Models and ClusterModels by phase (leader).",
            ["kind", "phase"],
            registry=registry,
        )
