"""The api process: wires the object store, the index and its builder, Kubernetes auth, the
ledger, uploads, serving and lookup into the apps, and runs them under uvicorn until SIGTERM.

Two listeners share one event loop: the public one (plain HTTP behind the Service port 80) and,
when a certificate is configured, the internal TLS one for the lookup API and the serving API of
the node plugin and the materializers (D159). On SIGTERM readiness
turns 503 at once, both stop accepting connections and let requests in flight finish
(`api_shutdown_grace_seconds`), then the builder stops and the index is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

import uvicorn
from fastapi import FastAPI

from ai_models.adapters.kube import ClientOptions, KubeConfigError, new_api_client
from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.objectstore import ObjectStore, open_store
from ai_models.api.app import create_app, create_internal_app
from ai_models.api.auth import Gatekeeper
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import BuilderTiming, IndexBuilder
from ai_models.api.catalog.ledger_view import LedgerState, LedgerView, secret_ledger_reader
from ai_models.api.connections import ConnectionLimits, guarded_protocol
from ai_models.api.kube_calls import KubeCalls
from ai_models.api.lookup.lookup import Lookup
from ai_models.api.metrics import ApiMetrics, MetricsServer
from ai_models.api.model_objects import ApiModels
from ai_models.api.serving.delivery_tokens import DeliveryTokens
from ai_models.api.serving.listing import ClusterModelListing
from ai_models.api.serving.serving import ArtifactServer, DownloadLimits, DownloadSlots
from ai_models.api.settings import ApiSettings, api_settings
from ai_models.api.signing_keys import SigningKeys
from ai_models.api.state import ApiState
from ai_models.api.upload.ledger import UploadLedger
from ai_models.api.upload.pace import UploadLimits
from ai_models.api.upload.uploads import Uploads
from ai_models.names import DELIVERY_SIGNING_SECRET, MODULE_TOKEN_AUDIENCE
from ai_models.settings import Settings

log = logging.getLogger(__name__)
# The pending-connection queue of each listener (uvicorn's default).
LISTEN_BACKLOG: Final = 2048


@dataclasses.dataclass
class ApiRuntime:
    """Everything one api instance owns; `close()` releases it."""

    app: FastAPI
    internal_app: FastAPI
    state: ApiState
    index: CatalogIndex
    builder: IndexBuilder
    metrics: ApiMetrics

    def close(self) -> None:
        if not self.builder.stop(timeout=10):
            log.warning("the index builder is still busy (a store read); leaving it behind")
        self.index.close()
        self.state.uploads.close()


def kube_client_options(settings: ApiSettings) -> ClientOptions:
    # Reviews have no side effects, so POSTs may be retried like reads.
    return ClientOptions(read_timeout_seconds=settings.api_kubernetes_timeout_seconds, retry_posts=True)


def build_runtime(
    settings: ApiSettings, *, store: ObjectStore, api_client: Any, metrics: ApiMetrics | None = None
) -> ApiRuntime:
    """The app and its parts over `store` and `api_client`; nothing runs until the builder is
    started. `metrics` is what `api_client` counts its requests in (new ones without)."""
    metrics = metrics or ApiMetrics()
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
    calls = KubeCalls(metrics=metrics)
    downloads = DownloadSlots(
        DownloadLimits(
            per_replica=settings.api_max_concurrent_downloads,
            per_subject=settings.api_max_concurrent_downloads_per_subject,
        )
    )
    metrics.downloads_in_flight.set_function(lambda: downloads.in_flight)
    models = ApiModels(
        api_client=api_client,
        calls=calls,
        request_timeout=timeout,
        cache_ttl_seconds=settings.api_object_cache_seconds,
    )
    gatekeeper = Gatekeeper(
        api_client=api_client,
        request_timeout=timeout,
        metrics=metrics,
        cache_ttl_seconds=settings.api_auth_cache_seconds,
    )
    # The internal listener's serving routes: only tokens issued for the module (D159).
    module_gatekeeper = Gatekeeper(
        api_client=api_client,
        request_timeout=timeout,
        metrics=metrics,
        cache_ttl_seconds=settings.api_auth_cache_seconds,
        audiences=(MODULE_TOKEN_AUDIENCE,),
    )
    uploads = Uploads(
        store=store,
        keys=SigningKeys(
            api_client=api_client,
            namespace=settings.namespace,
            calls=calls,
            request_timeout=timeout,
            ttl_seconds=settings.api_upload_signing_key_cache_seconds,
        ),
        models=models,
        ledger=UploadLedger(
            # The ledger's create is a POST the client may retry; the store reads a 409 as a
            # conflict and re-applies its change, so a retried create cannot double an entry.
            store=SecretLedgerStore(api_client, namespace=settings.namespace, request_timeout=timeout),
            capacity_bytes=settings.capacity_limit_bytes,
            metrics=metrics,
        ),
        gatekeeper=gatekeeper,
        metrics=metrics,
        limits=UploadLimits(
            idle_timeout_seconds=settings.api_upload_idle_timeout_seconds,
            min_bytes_per_second=settings.api_upload_min_bytes_per_second,
            rate_window_seconds=settings.api_upload_rate_window_seconds,
            max_seconds=settings.api_upload_max_seconds,
        ),
        max_concurrent=settings.api_max_concurrent_uploads,
        replica=settings.pod_name,
    )
    state = ApiState(
        catalog=Catalog(index=index, ledger=ledger),
        ledger=ledger,
        gatekeeper=gatekeeper,
        serving_gatekeeper=gatekeeper,
        uploads=uploads,
        serving=ArtifactServer(
            store=store,
            models=models,
            metrics=metrics,
            downloads=downloads,
        ),
        lookup=Lookup(models=models, module_namespace=settings.namespace),
        listing=ClusterModelListing(api_client=api_client, calls=calls, request_timeout=timeout),
        metrics=metrics,
        first_index_pass_complete=builder.first_pass_complete,
        delivery=DeliveryTokens(
            keys=SigningKeys(
                api_client=api_client,
                namespace=settings.namespace,
                calls=calls,
                request_timeout=timeout,
                ttl_seconds=settings.api_upload_signing_key_cache_seconds,
                secret=DELIVERY_SIGNING_SECRET,
                refused="delivery tokens are refused",
                call="GetDeliverySigningKey",
            )
        ),
    )
    return ApiRuntime(
        app=create_app(state),
        internal_app=create_internal_app(state, serving_gatekeeper=module_gatekeeper),
        state=state,
        index=index,
        builder=builder,
        metrics=metrics,
    )


class _Server(uvicorn.Server):
    """uvicorn that flips readiness the moment it is told to stop, and leaves signals to `serve`
    (two servers run in one process; each of them taking the signal handlers over would leave only
    the last one listening)."""

    def __init__(self, config: uvicorn.Config, *, shutting_down: threading.Event) -> None:
        super().__init__(config)
        self._shutting_down = shutting_down

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._shutting_down.set()
        super().handle_exit(sig, frame)


def connection_limits(settings: ApiSettings, *, metrics: ApiMetrics | None = None) -> ConnectionLimits:
    limits = ConnectionLimits(
        header_timeout_seconds=settings.api_header_timeout_seconds,
        write_stall_timeout_seconds=settings.api_write_stall_timeout_seconds,
        max_connections=settings.api_max_connections,
    )
    if metrics is None:
        return limits
    return dataclasses.replace(limits, on_closed=metrics.connection_closed)


def _uvicorn_config(
    app: FastAPI,
    *,
    host: str,
    port: int,
    grace_seconds: float,
    limits: ConnectionLimits,
    tls: tuple[Path, Path] | None = None,
) -> uvicorn.Config:
    # No body-size limit exists in uvicorn and none is added: uploads take as long as they take
    # (the upload API paces them). The request head has a deadline, the number of connections a
    # cap, and a response that its reader stops taking a stall timeout (`connections`).
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(limits),
        lifespan="off",
        # Our logging configuration stays in charge; per-request lines come from RequestMetrics.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(grace_seconds),
        server_header=False,
        backlog=LISTEN_BACKLOG,
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    # uvicorn decides on access lines by whether its logger has handlers anywhere up the tree, which
    # any logging setup can change; an access line carries the URL, and upload URLs carry a secret.
    logging.getLogger("uvicorn.access").disabled = True
    return config


def _listen(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    listener.set_inheritable(True)
    # Listening from here on, before "api starting" is logged: a client that connects between that
    # line and uvicorn's serving waits in the backlog instead of being refused (uvicorn listens on
    # the socket again with the same backlog).
    listener.listen(LISTEN_BACKLOG)
    return listener


@dataclasses.dataclass
class Listener:
    """One uvicorn server and the socket it serves."""

    name: str
    server: _Server
    socket: socket.socket

    @property
    def address(self) -> str:
        host, port = self.socket.getsockname()[:2]
        return f"{host}:{port}"


async def _serve_all(listeners: Sequence[Listener]) -> None:
    """Serve every listener; when one stops (a signal, an error), stop the others too."""
    tasks = [
        asyncio.create_task(item.server.serve(sockets=[item.socket]), name=f"serve-{item.name}")
        for item in listeners
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for item in listeners:
            item.server.should_exit = True
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for item, result in zip(listeners, results, strict=True):
        if isinstance(result, BaseException):
            log.error("a listener failed", exc_info=result, extra={"listener": item.name})


@contextlib.contextmanager
def _stop_on_signals(listeners: Sequence[Listener]) -> Iterator[None]:
    """SIGTERM/SIGINT stop every listener gracefully (a second SIGINT forces, as in uvicorn)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(sig: int, frame: FrameType | None) -> None:
        for item in listeners:
            item.server.handle_exit(sig, frame)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _internal_listener(runtime: ApiRuntime, config: ApiSettings, *, host: str) -> Listener | None:
    tls = config.internal_tls()
    if tls is None:
        log.info(
            "internal listener (lookup, serving for the node plugin and materializers) not started: no TLS "
            "certificate configured "
            f"({ApiSettings.variable('api_tls_cert_file')} and {ApiSettings.variable('api_tls_key_file')})",
            extra={"port": config.api_internal_port},
        )
        return None
    uvicorn_config = _uvicorn_config(
        runtime.internal_app,
        host=host,
        port=config.api_internal_port,
        grace_seconds=config.api_shutdown_grace_seconds,
        limits=connection_limits(config, metrics=runtime.state.metrics),
        tls=tls,
    )
    # Loaded here so an unreadable certificate stops the process with its file names.
    uvicorn_config.load()
    return Listener(
        name="internal",
        server=_Server(uvicorn_config, shutting_down=runtime.state.shutting_down),
        socket=_listen(host, config.api_internal_port),
    )


def serve(settings: Settings, *, host: str, port: int | None = None) -> int:
    """Run the api on `host:port` (and the internal listener) until SIGTERM/SIGINT; the exit code
    (0 after a clean stop). Without `port`, the `api_port` setting."""
    config = api_settings(settings)
    port = config.api_port if port is None else port
    if (config.api_tls_cert_file is None) != (config.api_tls_key_file is None):
        log.error(
            f"the internal listener needs both {ApiSettings.variable('api_tls_cert_file')} and "
            f"{ApiSettings.variable('api_tls_key_file')}",
            extra={"cert": str(config.api_tls_cert_file), "key": str(config.api_tls_key_file)},
        )
        return 2
    try:
        store = open_store(config)
    except ValueError as error:
        log.error("cannot open the object store", extra={"error": str(error)})
        return 2
    metrics = ApiMetrics()
    try:
        api_client = new_api_client(kube_client_options(config), observe=metrics.kubernetes_requests)
    except KubeConfigError as error:
        log.error("cannot configure the Kubernetes client", extra={"error": str(error)})
        return 2
    runtime = build_runtime(config, store=store, api_client=api_client, metrics=metrics)
    listeners: list[Listener] = []
    metrics_server: MetricsServer | None = None
    try:
        try:
            listeners.append(
                Listener(
                    name="public",
                    server=_Server(
                        _uvicorn_config(
                            runtime.app,
                            host=host,
                            port=port,
                            grace_seconds=config.api_shutdown_grace_seconds,
                            limits=connection_limits(config, metrics=runtime.state.metrics),
                        ),
                        shutting_down=runtime.state.shutting_down,
                    ),
                    socket=_listen(host, port),
                )
            )
            internal = _internal_listener(runtime, config, host=host)
            if internal is not None:
                listeners.append(internal)
        except (OSError, ssl.SSLError) as error:
            log.error(
                f"cannot listen; check the ports ({ApiSettings.variable('api_port')}, "
                f"{ApiSettings.variable('api_internal_port')}) and the internal listener's certificate files",
                extra={"address": host, "error": str(error)},
            )
            return 1
        try:
            metrics_server = MetricsServer(
                runtime.metrics, host=config.api_metrics_address, port=config.api_metrics_port
            )
        except OSError as error:
            log.error(
                f"cannot listen for metrics; set {ApiSettings.variable('api_metrics_port')} to a free port",
                extra={
                    "address": f"{config.api_metrics_address}:{config.api_metrics_port}",
                    "error": str(error),
                },
            )
            return 1
        runtime.builder.start()
        log.info(
            "api starting",
            extra={
                "address": listeners[0].address,
                "internal": listeners[1].address if len(listeners) > 1 else None,
                "store": store.description,
                "namespace": config.namespace,
            },
        )
        with _stop_on_signals(listeners):
            asyncio.run(_serve_all(listeners))
    finally:
        runtime.state.shutting_down.set()
        runtime.close()
        if metrics_server is not None:
            metrics_server.stop()
        api_client.close()
        for item in listeners:
            item.socket.close()
    if not all(item.server.started for item in listeners):
        log.error("the api did not start (see the errors above)", extra={"address": f"{host}:{port}"})
        return 1
    log.info("api stopped")
    return 0


class BackgroundServer:
    """An app under uvicorn in a thread on `host` and a free port (tests, the local stack);
    `tls` (certificate and key files) serves HTTPS, as the internal listener does; `limits` are
    the connection limits of the default settings unless given."""

    def __init__(
        self,
        app: FastAPI,
        *,
        shutting_down: threading.Event,
        host: str = "127.0.0.1",
        tls: tuple[Path, Path] | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self._socket = _listen(host, 0)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self.scheme = "https" if tls else "http"
        self._server = _Server(
            _uvicorn_config(
                app,
                host=host,
                port=self.port,
                grace_seconds=5,
                limits=limits or connection_limits(ApiSettings()),
                tls=tls,
            ),
            shutting_down=shutting_down,
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=f"api-{self.port}", daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

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
