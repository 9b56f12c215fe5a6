"""Metrics of the api process, on a registry of its own and served on a separate listener.

A listener of its own (loopback by default) keeps `/metrics` off the Service port the public
routes reach; in the cluster kube-rbac-proxy fronts it, as for every Deckhouse module component.
Each app gets its own registry so several apps in one process (tests) never collide.
"""

from __future__ import annotations

import logging
import threading
from typing import Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ai_models.adapters.kube.request_counting import RequestObserver, request_counter
from ai_models.names import API_KUBERNETES_REQUESTS_METRIC, API_METRICS_PREFIX

log = logging.getLogger(__name__)

PREFIX: Final = API_METRICS_PREFIX
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BUILD_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.kubernetes_requests: RequestObserver = request_counter(r, API_KUBERNETES_REQUESTS_METRIC)
        self.requests = Counter(
            f"{PREFIX}requests",
            "HTTP requests answered, by route template, method and status code.",
            ["route", "method", "code"],
            registry=r,
        )
        self.request_duration = Histogram(
            f"{PREFIX}request_duration_seconds",
            "Time to answer an HTTP request, by route template.",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.index_build_duration = Histogram(
            f"{PREFIX}catalog_index_build_duration_seconds",
            "Time to index one generation of a catalog source into the local index.",
            ["source"],
            buckets=_BUILD_BUCKETS,
            registry=r,
        )
        self.index_entries = Gauge(
            f"{PREFIX}catalog_index_entries", "Entries served per catalog source.", ["source"], registry=r
        )
        self.index_source_refresh = Gauge(
            f"{PREFIX}catalog_index_last_refresh_timestamp_seconds",
            "When this source's served generation was last confirmed current or indexed (Unix time).",
            ["source"],
            registry=r,
        )
        self.index_refresh = Gauge(
            f"{PREFIX}catalog_index_last_successful_poll_timestamp_seconds",
            "When a poll of every source's manifest last completed without an error (Unix time).",
            registry=r,
        )
        self.index_errors = Counter(
            f"{PREFIX}catalog_index_refresh_errors",
            "Failed attempts to read or index a source (the last complete generation stays served).",
            ["source"],
            registry=r,
        )
        # The api's own view of its calls by purpose; every request on the wire is in
        # kubernetes_requests (verb, resource, code), as the controller's and the node plugin's.
        self.kubernetes_calls = Counter(
            f"{PREFIX}kubernetes_calls",
            "Calls to the Kubernetes API, by call and result (Success, Error: it answered with an "
            "error, Unavailable: it could not be reached).",
            ["call", "result"],
            registry=r,
        )
        self.upload_bytes = Counter(
            f"{PREFIX}upload_bytes",
            "Bytes of uploads received and handed to the object store (failed uploads included).",
            registry=r,
        )
        self.served_bytes = Counter(
            f"{PREFIX}served_bytes",
            "Bytes of artifact files and manifests sent by the serving API.",
            registry=r,
        )
        self.connections_closed = Counter(
            f"{PREFIX}connections_closed",
            "Connections the api closed itself, by reason: TooManyConnections (past the cap), "
            "HeaderTimeout (no request head in time), NotHttp, WriteStalled (its reader stopped reading).",
            ["reason"],
            registry=r,
        )
        self.downloads_in_flight = Gauge(
            f"{PREFIX}downloads_in_flight", "File downloads this replica streams now.", registry=r
        )
        self.ledger_reads = Counter(
            f"{PREFIX}ledger_reads",
            "Reads of the storage ledger Secret for verdicts and the storage summary, by outcome.",
            ["state"],
            registry=r,
        )

    def connection_closed(self, reason: str) -> None:
        self.connections_closed.labels(reason).inc()

    def forget_source(self, source: str) -> None:
        """Drop a source's series once it is no longer served, so dashboards do not show a ghost."""
        for family in (
            self.index_entries,
            self.index_source_refresh,
            self.index_build_duration,
            self.index_errors,
        ):
            try:
                family.remove(source)
            except KeyError:
                continue


class MetricsServer:
    """`/metrics` on its own listener; `port` 0 picks a free port (see `.port`)."""

    def __init__(self, metrics: ApiMetrics, *, host: str, port: int) -> None:
        self._server: WSGIServer
        self._thread: threading.Thread
        self._server, self._thread = start_http_server(port, addr=host, registry=metrics.registry)
        self.host = host
        self.port = int(self._server.server_port)
        log.info("serving metrics", extra={"address": f"{host}:{self.port}", "path": "/metrics"})

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
