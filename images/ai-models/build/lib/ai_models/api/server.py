"""The api process: wires the object store, the index and its builder, Kubernetes auth and metrics
into the app, and runs it under uvicorn until SIGTERM.

On SIGTERM readiness turns 503 at once, uvicorn stops accepting connections and lets requests in
flight finish (`api_shutdown_grace_seconds`), then the builder stops and the index is removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from ai_models.adapters.kube import ClientOptions, KubeConfigError, new_api_client
from ai_models.adapters.objectstore import ObjectStore, open_store
from ai_models.api.app import create_app
from ai_models.api.auth import Gatekeeper
from ai_models.api.catalog import Catalog
from ai_models.api.index import CatalogIndex
from ai_models.api.index_builder import BuilderTiming, IndexBuilder
from ai_models.api.ledger_view import LedgerState, LedgerView, secret_ledger_reader
from ai_models.api.metrics import ApiMetrics, MetricsServer
from ai_models.api.settings import ApiSettings, api_settings
from ai_models.api.state import ApiState
from ai_models.settings import Settings

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ApiRuntime:
    """Everything one api instance owns; `close()` releases it."""

    app: FastAPI
    state: ApiState
    index: CatalogIndex
    builder: IndexBuilder
    metrics: ApiMetrics

    def close(self) -> None:
        if not self.builder.stop(timeout=10):
            log.warning("the index builder is still busy (a store read); leaving it behind")
        self.index.close()


def kube_client_options(settings: ApiSettings) -> ClientOptions:
    # Reviews have no side effects, so POSTs may be retried like reads.
    return ClientOptions(read_timeout_seconds=settings.api_kubernetes_timeout_seconds, retry_posts=True)


def build_runtime(settings: ApiSettings, *, store: ObjectStore, api_client: Any) -> ApiRuntime:
    """The app and its parts; nothing runs until the builder is started."""
    metrics = ApiMetrics()
    timeout = kube_client_options(settings).request_timeout
    readers = settings.api_index_readers
    index = CatalogIndex(
        directory=settings.api_index_dir,
        readers=readers,
        cache_kib_per_connection=settings.index_cache_bytes() // 1024 // (readers + 1),
    )
    builder = IndexBuilder(
        store=store,
        index=index,
        metrics=metrics,
        timing=BuilderTiming(
            interval_seconds=settings.api_index_refresh_seconds,
            retry_base_seconds=settings.api_index_retry_base_seconds,
            retry_cap_seconds=settings.api_index_retry_cap_seconds,
        ),
    )

    def count_read(state: LedgerState) -> None:
        metrics.ledger_reads.labels(state.value).inc()

    ledger = LedgerView(
        read=secret_ledger_reader(api_client, namespace=settings.namespace, request_timeout=timeout),
        capacity_bytes=settings.capacity_limit_bytes,
        max_age_seconds=settings.api_ledger_max_age_seconds,
        on_read=count_read,
    )
    state = ApiState(
        catalog=Catalog(index=index, ledger=ledger),
        gatekeeper=Gatekeeper(
            api_client=api_client,
            request_timeout=timeout,
            metrics=metrics,
            cache_ttl_seconds=settings.api_auth_cache_seconds,
        ),
        metrics=metrics,
        first_index_pass_complete=builder.first_pass_complete,
    )
    return ApiRuntime(app=create_app(state), state=state, index=index, builder=builder, metrics=metrics)


class _Server(uvicorn.Server):
    """uvicorn that flips readiness the moment it is told to stop."""

    def __init__(self, config: uvicorn.Config, *, shutting_down: threading.Event) -> None:
        super().__init__(config)
        self._shutting_down = shutting_down

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._shutting_down.set()
        super().handle_exit(sig, frame)


def _uvicorn_config(app: FastAPI, *, host: str, port: int, grace_seconds: float) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        # Our logging configuration stays in charge; per-request lines come from RequestMetrics.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(grace_seconds),
        server_header=False,
    )


@contextlib.contextmanager
def _absorb_replayed_signals() -> Iterator[None]:
    """uvicorn re-raises the signal that stopped it once it has shut down, for an enclosing program
    to act on; this process is that program, and it still has cleanup to run and an exit code to
    return, so the replayed signal lands here instead of killing it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda _sig, _frame: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve(settings: Settings, *, host: str, port: int) -> int:
    """Run the api on `host:port` until SIGTERM/SIGINT; the exit code (0 after a clean stop)."""
    config = api_settings(settings)
    try:
        store = open_store(config)
    except ValueError as error:
        log.error("cannot open the object store", extra={"error": str(error)})
        return 2
    try:
        api_client = new_api_client(kube_client_options(config))
    except KubeConfigError as error:
        log.error("cannot configure the Kubernetes client", extra={"error": str(error)})
        return 2
    runtime = build_runtime(config, store=store, api_client=api_client)
    try:
        metrics_server = MetricsServer(
            runtime.metrics, host=config.api_metrics_address, port=config.api_metrics_port
        )
    except OSError as error:
        log.error(
            "cannot listen for metrics; set AI_MODELS_API_METRICS_PORT to a free port",
            extra={"address": f"{config.api_metrics_address}:{config.api_metrics_port}", "error": str(error)},
        )
        runtime.close()
        api_client.close()
        return 1
    server = _Server(
        _uvicorn_config(runtime.app, host=host, port=port, grace_seconds=config.api_shutdown_grace_seconds),
        shutting_down=runtime.state.shutting_down,
    )
    runtime.builder.start()
    log.info(
        "api starting",
        extra={"address": f"{host}:{port}", "store": store.description, "namespace": config.namespace},
    )
    try:
        with _absorb_replayed_signals():
            server.run()
    finally:
        runtime.state.shutting_down.set()
        runtime.close()
        metrics_server.stop()
        api_client.close()
    if not server.started:
        log.error("the api did not start (see the errors above)", extra={"address": f"{host}:{port}"})
        return 1
    log.info("api stopped")
    return 0


class BackgroundServer:
    """The app under uvicorn in a thread on `host` and a free port (tests, the local stack)."""

    def __init__(self, app: FastAPI, *, shutting_down: threading.Event, host: str = "127.0.0.1") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self._server = _Server(
            _uvicorn_config(app, host=host, port=self.port, grace_seconds=5), shutting_down=shutting_down
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=f"api-{self.port}", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, timeout: float = 10.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the api did not start on {self.url} within {timeout} s; see the log")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.handle_exit(0, None)
        self._thread.join(timeout=10)
        self._socket.close()
