"""`ai-models node-cache`: the CSI node plugin of NodeCache delivery, assembled and run until SIGTERM.

Start: the cache is opened first (its completion records and references are read, so a restarted
plugin knows what its pods mount), then the gRPC server listens on the socket, then /healthz
answers 200 (the startup probe lets kubelet's registrar in only then); the prefetcher watches the
Pods bound to this node and the reporter writes the Node's readiness label and cache report. Stop
(SIGTERM, SIGINT): the Node's label goes to "false" first (the controller places no new pod here),
new calls are refused, running ones get a few seconds, downloads stop where they are (their staging
is resumed by the next plugin), and the bind mounts of running pods stay: they need no process.
Exit codes: 0 stopped on a signal, 1 could not start, 2 bad settings.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.kube.client import KubeConfigError
from ai_models.adapters.kube.request_counting import request_counter
from ai_models.names import NODE_CACHE_KUBERNETES_REQUESTS_METRIC
from ai_models.nodecache.cache import CacheConfig, NodeCache
from ai_models.nodecache.health import HealthServer
from ai_models.nodecache.identity import IdentityService
from ai_models.nodecache.models import NodeModels
from ai_models.nodecache.node import NodeService
from ai_models.nodecache.prefetch import Prefetcher
from ai_models.nodecache.report import NodeReporter
from ai_models.nodecache.server import CsiServer, socket_path
from ai_models.nodecache.settings import NodeCacheSettings

log = logging.getLogger(__name__)

EXIT_STOPPED = 0
EXIT_FAILED = 1
EXIT_BAD_SETTINGS = 2


@dataclass(frozen=True)
class PluginArguments:
    """What the command line names: what differs per node."""

    csi_endpoint: str
    node_name: str
    cache_root: Path


def main(arguments: PluginArguments, *, stop: threading.Event | None = None) -> int:
    try:
        settings = NodeCacheSettings()  # type: ignore[call-arg]  # required fields come from the environment
    except ValidationError as error:
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else ""
            where = NodeCacheSettings.variable(field) if field in NodeCacheSettings.model_fields else field
            print(f"ai-models node-cache: invalid setting {where}: {problem['msg']}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    try:
        socket_path(arguments.csi_endpoint)
    except ValueError as error:
        print(f"ai-models node-cache: {error}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    stop = stop or _stop_on_signals()
    return run(arguments, settings, stop=stop)


def run(arguments: PluginArguments, settings: NodeCacheSettings, *, stop: threading.Event) -> int:
    registry = CollectorRegistry()
    try:
        api_client = new_api_client(
            ClientOptions(), observe=request_counter(registry, NODE_CACHE_KUBERNETES_REQUESTS_METRIC)
        )
    except KubeConfigError as error:
        log.error("cannot reach the Kubernetes API", extra={"error": str(error)})
        return EXIT_FAILED
    cache: NodeCache | None = None
    server: CsiServer | None = None
    health: HealthServer | None = None
    prefetcher: Prefetcher | None = None
    reporter: NodeReporter | None = None
    try:
        cache = NodeCache(
            CacheConfig(
                root=arguments.cache_root,
                limit_bytes=settings.node_cache_size,
                api_url=settings.node_cache_api_url,
                token_file=settings.node_cache_token_file,
                ca_file=settings.node_cache_api_ca_file,
                max_concurrent_downloads=settings.node_cache_max_concurrent_downloads,
                eviction_grace_seconds=settings.node_cache_eviction_grace_seconds,
            )
        )
        opened = cache
        # One reader for NodePublish and the prefetch: a granted answer serves both.
        models = NodeModels.of_cluster(api_client)
        server = CsiServer(
            endpoint=arguments.csi_endpoint,
            identity=IdentityService(ready=opened.usable),
            node=NodeService(
                node_name=arguments.node_name,
                kubelet_dir=settings.node_cache_kubelet_dir,
                cache=opened,
                models=models,
                publish_wait_seconds=settings.node_cache_publish_wait_seconds,
            ),
        ).start()
        listening = server
        health = HealthServer(
            healthy=lambda: listening.listening and opened.usable(),
            address=settings.node_cache_health_address,
            port=settings.node_cache_health_port,
            registry=registry,
        ).start()
        prefetcher = Prefetcher(
            cache=opened, models=models, api_client=api_client, node_name=arguments.node_name
        )
        prefetcher.start()
        reporter = NodeReporter(cache=opened, api_client=api_client, node_name=arguments.node_name).start()
        log.info(
            "node cache plugin started",
            extra={
                "node": arguments.node_name,
                "root": str(arguments.cache_root),
                "socket": str(server.path),
            },
        )
        stop.wait()
        log.info("node cache plugin stopping", extra={"node": arguments.node_name})
        return EXIT_STOPPED
    except (OSError, ValueError) as error:
        log.error("node cache plugin could not start", extra={"error": str(error)})
        return EXIT_FAILED
    finally:
        if reporter is not None:
            reporter.close()
        if prefetcher is not None:
            prefetcher.close()
        if health is not None:
            health.stop()
        if server is not None:
            server.stop()
        if cache is not None:
            cache.close()
        api_client.close()


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def stopping(_signal: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    return stop
