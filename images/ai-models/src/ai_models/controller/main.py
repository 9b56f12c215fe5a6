"""`ai-models controller`: probes and metrics on every replica, reconciling only on the leader."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from prometheus_client import REGISTRY

from ai_models.adapters.hub import EndpointPolicy, HubClient, set_default_policy
from ai_models.adapters.kube import KubeConfigError, load_configuration, startup
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.leases import LeaseTiming, lead_while_holding_lease
from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.kube.request_counting import RequestObserver
from ai_models.adapters.kube.resources import MODEL_CATALOG_SOURCES
from ai_models.adapters.objectstore import open_store
from ai_models.controller.catalog import CatalogRuntime, catalog_controller
from ai_models.controller.delivery.wiring import attach_delivery, start_webhook
from ai_models.controller.health import ProbeServer, ProbeState, serve_metrics
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.models.metrics import ModelMetrics
from ai_models.controller.models.runtime import ModelRuntime
from ai_models.controller.models.snapshots import hub_snapshot
from ai_models.controller.prerequisites import PrerequisitesCollector, check, log_verdict
from ai_models.controller.runtime import Manager
from ai_models.controller.runtime.webhook import WebhookServer
from ai_models.controller.settings import ControllerSettings
from ai_models.controller.storage.metrics import LedgerCollector, StorageMetrics
from ai_models.controller.storage.runtime import StorageRuntime
from ai_models.domain.backoff import Backoff
from ai_models.names import DELIVERY_WEBHOOK_NAME

log = logging.getLogger(__name__)
# The first API call is retried START_ATTEMPTS times, 2 s apart doubling to at most 30 s: about
# three minutes of waiting (plus the calls' timeouts) before the process gives up with exit code 1.
START_ATTEMPTS = 10
START_BACKOFF = Backoff(base=2.0, cap=30.0)
START_REQUEST_TIMEOUT = (5.0, 10.0)  # (connect, read): a stalled API server is retried, not awaited


class _Terminated(Exception):
    """SIGTERM/SIGINT: unwind the leader election loop and stop."""


class KubernetesUnreachable(RuntimeError):
    """The API server did not answer within the start-up attempts."""


def _raise_terminated(signum: int, _frame: FrameType | None) -> None:
    raise _Terminated(signal.Signals(signum).name)


def _unreachable_because(error: KubeError) -> str:
    """What the failed probe says, for the log: without an answer, the transport's own words too,
    which name the address and the failure (refused, timed out) an operator checks first; they come
    from this process, never from the server."""
    if error.status == 0 and error.__cause__ is not None:
        return f"{error}: {error.__cause__}"
    return str(error)


def _load_kube_configuration(
    *, observe: RequestObserver | None = None, sleep: Callable[[float], None] = time.sleep
) -> Any:
    """The pod's ServiceAccount in a pod, KUBECONFIG elsewhere (`KubeConfigError` when neither
    works), and one call (the server's version) to see the API answer. A slow, restarting or
    absent API server delays the start with bounded retries and exponential backoff, one log line
    per attempt, instead of crash-looping the pod; `KubernetesUnreachable` once the attempts are
    used up."""
    # A configuration that cannot be loaded is not retried: waiting would not fix it.
    configuration = load_configuration()
    # The leader election's Lease calls go through the client's default configuration.
    startup.make_default(configuration)
    started = time.monotonic()
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            # One try each: this loop retries, with backoff; the client's own retries come at once.
            startup.probe_version(configuration, timeout=START_REQUEST_TIMEOUT, observe=observe)
        except KubeError as error:
            waited = round(time.monotonic() - started, 1)
            why = _unreachable_because(error)
            if attempt == START_ATTEMPTS:
                raise KubernetesUnreachable(
                    f"the Kubernetes API did not answer in {attempt} attempts over {waited} s: {why}; "
                    "check the API server and the network path to it (KUBERNETES_SERVICE_HOST in a pod, "
                    "KUBECONFIG elsewhere)"
                ) from error
            delay = START_BACKOFF.delay(attempt)
            log.warning(
                "Kubernetes API not reachable yet, retrying",
                extra={
                    "attempt": attempt,
                    "attempts": START_ATTEMPTS,
                    "retry_in_seconds": delay,
                    "error": why,
                },
            )
            sleep(delay)
            continue
        if attempt > 1:
            log.info(
                "Kubernetes API reachable",
                extra={"attempt": attempt, "waited_seconds": round(time.monotonic() - started, 1)},
            )
        return startup.api_client(configuration, observe=observe)
    raise AssertionError("unreachable")


def run(settings: ControllerSettings) -> int:
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_terminated)
    probes = ProbeState()
    probe_server = ProbeServer(
        state=probes, address=settings.controller_health_address, port=settings.controller_health_port
    ).start()
    metrics = ControllerMetrics(REGISTRY)
    serve_metrics(address=settings.controller_metrics_address, port=settings.controller_metrics_port)
    webhook: WebhookServer | None = None
    try:
        api = _load_kube_configuration(observe=metrics.kubernetes_requests)
        # Every replica reports the verdict at once, before waiting for the lease: in a cluster
        # without monitoring this log line is where an admin learns delivery cannot work.
        try:
            log_verdict(check(api, settings))
        except Exception as error:
            log.warning("storage-prerequisites check failed at start", extra={"error": str(error)})
        REGISTRY.register(PrerequisitesCollector(api=api, settings=settings))
        REGISTRY.register(
            LedgerCollector(
                SecretLedgerStore(api, namespace=settings.namespace),
                capacity_bytes=settings.capacity_limit_bytes,
            )
        )
        storage_metrics = StorageMetrics(REGISTRY)
        store = open_store(settings)
        # Every Hub request of this process (catalog passes and publication planning) obeys it.
        hub_policy = EndpointPolicy(allow_link_local=settings.sources_allow_link_local_endpoints)
        set_default_policy(hub_policy)
        events = EventRecorder(api)
        catalog = CatalogRuntime(
            settings=settings,
            store=store,
            api=api,
            hub_for=lambda spec: HubClient(
                endpoint=spec.endpoint,
                token=spec.token,
                policy=hub_policy,
                timeout=settings.catalog_hub_timeout_seconds,
                listing_deadline=settings.catalog_listing_deadline_seconds,
            ),
            metrics=metrics,
            record_event=events.record,
        )
        # Only the Lease holder reconciles: the manager starts every informer, controller and loop
        # when this replica leads and stops them all when it no longer does.
        manager = Manager(observer=metrics)
        catalog_informer = manager.informer(Informer(api, MODEL_CATALOG_SOURCES))
        manager.controller(catalog_controller(catalog, informer=catalog_informer))
        models = ModelRuntime(
            settings=settings,
            api_client=api,
            store=store,
            metrics=ModelMetrics(REGISTRY),
            snapshot=hub_snapshot,
            events=events,
        )
        models.attach(manager, catalog_sources=catalog_informer)
        StorageRuntime(
            settings=settings,
            api_client=api,
            store=store,
            objects=models.objects,
            accounting=models.accounting,
            job_cache=models.jobs_informer.objects,
            metrics=storage_metrics,
            on_damaged=models.damaged,
        ).attach(manager)
        # Both modes deliver (the settings say how); every replica admits workloads: the API server
        # calls whichever the Service picks.
        attach_delivery(
            manager, api_client=api, settings=settings, models=models.models_informers, events=events
        )
        webhook = start_webhook(
            api, settings, observe_duration=metrics.admission_observer(DELIVERY_WEBHOOK_NAME)
        )
        probes.mark_ready()

        def reconcile(stop: threading.Event) -> None:
            metrics.leader.set(1)
            try:
                manager.run(stop)
            finally:
                metrics.leader.set(0)

        lead_while_holding_lease(
            lease_name=settings.controller_lease_name,
            namespace=settings.namespace,
            identity=settings.pod_name,
            timing=LeaseTiming(
                lease_duration=settings.controller_lease_duration_seconds,
                renew_deadline=settings.controller_renew_deadline_seconds,
                retry_period=settings.controller_retry_period_seconds,
            ),
            work=reconcile,
            observe=metrics.kubernetes_requests,
        )
    except _Terminated as terminated:
        log.info("stopping", extra={"signal": str(terminated)})
    except KubernetesUnreachable as error:
        log.error("giving up: the Kubernetes API is not reachable", extra={"error": str(error)})
        return 1
    except KubeConfigError as error:
        log.error("cannot configure the Kubernetes client", extra={"error": str(error)})
        return 2
    finally:
        probes.mark_stopping()
        if webhook is not None:
            webhook.stop()
        probe_server.stop()
    return 0
