"""Serving the emulator over HTTP(S) on 127.0.0.1: the aiohttp application, a background-thread
runner for in-process use (tests), and the coroutine the standalone CLI runs.

TLS is on by default with a fresh self-signed certificate, because kubectl only sends bearer
tokens over TLS; `tls=False` serves plain HTTP (the Python client still authenticates there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from kubeemu import crds
from kubeemu.admission import MutatingAdmission
from kubeemu.authn import Identity
from kubeemu.cluster import Cluster
from kubeemu.handlers import STATE, AppState, error_middleware, handle
from kubeemu.kubeconfig import api_client, kubeconfig_document
from kubeemu.openapi import OpenAPIDocuments
from kubeemu.podlogs import PodLogSource
from kubeemu.tlscert import self_signed

log = logging.getLogger("kubeemu")

DEFAULT_BOOKMARK_INTERVAL = 60.0


def tls_context(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server TLS context with a new self-signed certificate; returns it and the CA (= cert) file."""
    cert, key = self_signed().write(directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


def build_app(
    cluster: Cluster,
    *,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    admission: MutatingAdmission | None = None,
    pod_logs: PodLogSource | None = None,
) -> web.Application:
    app = web.Application(middlewares=[error_middleware], client_max_size=64 * 1024 * 1024)
    state = AppState(
        cluster=cluster,
        openapi=OpenAPIDocuments(cluster.registry),
        bookmark_interval=bookmark_interval,
        admission=admission or MutatingAdmission(cluster),
        pod_logs=pod_logs,
    )
    app[STATE] = state
    app.router.add_route("*", "/{tail:.*}", handle)

    async def on_shutdown(app: web.Application) -> None:
        # End every open watch now, so shutdown does not wait for their timeouts.
        state.stopping.set()
        for subscription in list(state.watches):
            subscription.close()

    app.on_shutdown.append(on_shutdown)
    return app


class EmulatorServer:
    """The emulator on 127.0.0.1 in a background thread with its own event loop.

    Use as a context manager (or start()/stop()); `url` is the server address. The sync `kubernetes`
    client and kubectl talk to it over HTTP from the calling thread or other processes.
    """

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = True,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
        pod_logs: PodLogSource | None = None,
    ) -> None:
        self.cluster = cluster or Cluster()
        self.pod_logs = pod_logs  # where Pods' logs are (`kubectl logs`), see kubeemu.podlogs
        self.host = host
        self.port = port
        self.tls = tls
        self._cert_dir: Path | None = None
        self._ssl: ssl.SSLContext | None = None
        self.ca_file: Path | None = None
        self._bookmark_interval = bookmark_interval
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.admission = MutatingAdmission(self.cluster)

    def route_service(self, namespace: str, name: str, port: int, *, host: str = "127.0.0.1") -> None:
        """Admission webhook calls to Service `namespace/name` go to host:port (a local server)."""
        self.admission.route_service(namespace, name, port, host=host)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> str | None:
        return self.ca_file.read_text() if self.ca_file is not None else None

    def start(self) -> EmulatorServer:
        if self.tls:
            self._cert_dir = Path(tempfile.mkdtemp(prefix="kubeemu-tls-"))
            self._ssl, self.ca_file = tls_context(self._cert_dir)
        self._thread = threading.Thread(target=self._run, name=f"kubeemu-{self.port}", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            raise RuntimeError("emulator failed to start") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
            loop.run_forever()
        except BaseException as exc:  # surfaced to start() instead of dying silently in the thread
            self._error = exc
            self._ready.set()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        app = build_app(
            self.cluster,
            bookmark_interval=self._bookmark_interval,
            admission=self.admission,
            pod_logs=self.pod_logs,
        )
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._ssl)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        app[STATE].server_address = f"{self.host}:{self.port}"
        self._ready.set()

    def stop(self) -> None:
        loop, runner = self._loop, self._runner
        if loop is None or self._thread is None:
            return
        if runner is not None and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(runner.cleanup(), loop)
            with contextlib.suppress(Exception):
                future.result(timeout=10)
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        if self._cert_dir is not None:
            shutil.rmtree(self._cert_dir, ignore_errors=True)
            self._cert_dir = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def kubeconfig(
        self, identities: Iterable[tuple[str, Identity]] = (), *, current: str | None = None
    ) -> dict[str, Any]:
        """A kubeconfig with one context per (name, identity); the superuser when none are given."""
        entries = list(identities) or [("admin", self.cluster.superuser)]
        return kubeconfig_document(self.url, entries, current=current, ca_pem=self.ca_pem)

    def api_client(self, identity: Identity | None = None) -> Any:
        """A `kubernetes.client.ApiClient` for `identity` (default: the superuser); close it when done."""
        return api_client(self.url, (identity or self.cluster.superuser).token, ca_file=self.ca_file)


async def serve_forever(
    cluster: Cluster,
    *,
    host: str,
    port: int,
    stop: asyncio.Event,
    ssl_context: ssl.SSLContext | None = None,
    bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    ready: asyncio.Future[str] | None = None,
    admission: MutatingAdmission | None = None,
    pod_logs: PodLogSource | None = None,
) -> None:
    """Serve until `stop` is set (the standalone and `make dev` entry points); `admission` carries
    the Service routes of admission webhooks (`MutatingAdmission.route_service`)."""
    app = build_app(cluster, bookmark_interval=bookmark_interval, admission=admission, pod_logs=pod_logs)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    app[STATE].server_address = f"{host}:{bound}"
    if ready is not None:
        ready.set_result(f"{'https' if ssl_context else 'http'}://{host}:{bound}")
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def cluster_with_crds(
    crd_dirs: Iterable[Path], *, identities: Iterable[Identity] = (), superuser: Identity | None = None
) -> Cluster:
    cluster = Cluster(identities=list(identities), superuser=superuser)
    for directory in crd_dirs:
        cluster.load_crds(crds.load_crd_manifests(directory))
    return cluster
