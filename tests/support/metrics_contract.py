"""Which metrics the module's code exports, and which metrics a PromQL expression reads.

Alerts and dashboards are checked against these, so a renamed metric breaks a test, not a pager.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from ai_models.adapters.kube.request_counting import request_counter
from ai_models.api.metrics import ApiMetrics
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.models.metrics import ModelMetrics
from ai_models.controller.prerequisites import METRIC as PREREQUISITES_METRIC
from ai_models.controller.storage.metrics import LEDGER_METRICS, StorageMetrics
from ai_models.names import NODE_CACHE_KUBERNETES_REQUESTS_METRIC

# The api's transfer counters: bytes received by the upload API, bytes sent by the serving API.
API_TRANSFER_METRICS = frozenset(
    {"d8_ai_models_api_upload_bytes_total", "d8_ai_models_api_served_bytes_total"}
)

# Metrics of the platform (Prometheus itself, kube-state-metrics) the rules may use.
PLATFORM_METRICS = {"up", "kube_deployment_status_replicas_available"}
PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
}
PROMQL_FUNCTIONS = {
    "absent",
    "max",
    "min",
    "sum",
    "count",
    "avg",
    "rate",
    "increase",
    "time",
    "clamp_min",
    "histogram_quantile",
}


def exported_metrics() -> set[str]:
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    StorageMetrics(registry)
    ModelMetrics(registry)
    ApiMetrics(registry)
    request_counter(registry, NODE_CACHE_KUBERNETES_REQUESTS_METRIC)  # the node plugin's (nodecache/main)
    names = {PREREQUISITES_METRIC, *LEDGER_METRICS}
    for family in registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names.update(f"{family.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
    return names


def metric_names(expr: str) -> set[str]:
    without_strings = re.sub(r'"[^"]*"', "", expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    without_durations = re.sub(r"\[[^\]]*\]", "", without_labels)
    identifiers = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_durations))
    grouped = set(re.findall(r"(?:by|without|on|ignoring)\s*\(([^)]*)\)", without_strings))
    grouping_labels = {label.strip() for group in grouped for label in group.split(",")}
    return identifiers - PROMQL_KEYWORDS - PROMQL_FUNCTIONS - grouping_labels
