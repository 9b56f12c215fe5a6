"""Wiring of the model reconciler into the leader: watches, the work queue, resync, inventory.

kopf delivers Model and ClusterModel events (its cluster-wide watches, already running for the
catalog); the controller's own informers follow the publication Jobs and the ledger Secret in
the module namespace. All of it starts and stops with the operator, i.e. only on the leader.
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import kopf
from kubernetes import client as k8s

from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.informer import Informer
from ai_models.controller.models.jobs import JobApi, JobLimits, load_pod_template, owner_key
from ai_models.controller.models.kube import ModelKey, ModelObjects, key_of
from ai_models.controller.models.planning import Planner, SnapshotReader
from ai_models.controller.models.reconciler import Reconciler, ReconcilerSettings
from ai_models.controller.settings import ControllerSettings
from ai_models.controller.storage.accounting import Accounting
from ai_models.controller.storage.inventory import InventoryPass
from ai_models.controller.storage.metrics import StorageMetrics
from ai_models.controller.workqueue import WorkQueue, run_workers
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    LedgerFormatError,
    ledger_from_json,
)
from ai_models.names import (
    API_GROUP,
    API_VERSION,
    COMPONENT_LABEL,
    PUBLICATION_COMPONENT,
    ModelKind,
)

log = logging.getLogger(__name__)
SYNC_TIMEOUT_SECONDS = 60.0


class ModelRuntime:
    def __init__(
        self,
        *,
        settings: ControllerSettings,
        api_client: Any,
        store: ObjectStore,
        metrics: StorageMetrics,
        snapshot: SnapshotReader,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.queue: WorkQueue[ModelKey] = WorkQueue()
        namespace = settings.namespace
        self.objects = ModelObjects(api_client)
        self.accounting = Accounting(
            SecretLedgerStore(api_client, namespace=namespace), capacity_bytes=settings.capacity_limit_bytes
        )
        self.jobs_informer = Informer(
            api_client=api_client,
            lister=k8s.BatchV1Api(api_client).list_namespaced_job,
            namespace=namespace,
            what="publication-jobs",
            label_selector=f"{COMPONENT_LABEL}={PUBLICATION_COMPONENT}",
            on_change=self._job_changed,
        )
        self.ledger_informer = Informer(
            api_client=api_client,
            lister=k8s.CoreV1Api(api_client).list_namespaced_secret,
            namespace=namespace,
            what="ledger",
            field_selector=f"metadata.name={LEDGER_SECRET_NAME}",
            on_change=self._ledger_changed,
        )
        self.reconciler = Reconciler(
            objects=self.objects,
            jobs=JobApi(api_client, namespace=namespace),
            job_cache=self.jobs_informer.objects,
            planner=Planner(
                objects=self.objects,
                api_client=api_client,
                store=store,
                snapshot=snapshot,
                hf_endpoint=settings.hf_endpoint,
                module_namespace=namespace,
            ),
            store=store,
            accounting=self.accounting,
            api_client=api_client,
            pod_template=self._pod_template,
            settings=ReconcilerSettings(
                namespace=namespace,
                store_url=settings.store_url or "",
                max_concurrent_publications=settings.publication_max_concurrent,
                limits=JobLimits(
                    backoff_limit=settings.publication_backoff_limit,
                    deadline_seconds=settings.publication_deadline_seconds,
                ),
                retry_failed_seconds=settings.publication_retry_seconds,
                upload_token_ttl=datetime.timedelta(seconds=settings.upload_token_ttl_seconds),
                upload_poll_seconds=settings.upload_poll_seconds,
                upload_in_cluster_url=settings.upload_in_cluster_url,
                upload_public_url=settings.upload_public_url,
            ),
        )
        self.reconciler.on_slot_freed = self._wake
        self.reconciler.on_published = lambda result: self.metrics.publications.labels(result).inc()
        self.inventory = InventoryPass(
            store=store,
            objects=self.objects,
            accounting=self.accounting,
            job_cache=self.jobs_informer.objects,
            grace=datetime.timedelta(seconds=settings.inventory_orphan_grace_seconds),
            max_removal_fraction=settings.inventory_max_removal_fraction,
            metrics=metrics,
        )
        self._inventory_now = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _wake(self, keys: set[ModelKey]) -> None:
        for key in keys:
            self.queue.add(key)

    def _pod_template(self) -> Mapping[str, Any]:
        path = self.settings.publish_pod_template_file
        if path is None:
            raise RuntimeError(
                "AI_MODELS_PUBLISH_POD_TEMPLATE_FILE is not set: the controller needs the publisher pod "
                "template that the module's Helm chart renders (ConfigMap ai-models-publisher-template)"
            )
        return load_pod_template(path)

    # ----- kopf ---------------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        for kind in ModelKind:

            @kopf.on.event(API_GROUP, API_VERSION, kind.plural.value, registry=registry)
            def model_event(body: kopf.Body, **_: Any) -> None:
                self.queue.add(key_of({"kind": body.get("kind"), "metadata": body["metadata"]}))

        @kopf.on.startup(registry=registry)
        def start_models(**_: Any) -> None:
            self.start()

        @kopf.on.cleanup(registry=registry)
        def stop_models(**_: Any) -> None:
            self.stop()

    # ----- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self.jobs_informer.start()
        self.ledger_informer.start()
        if not self.jobs_informer.wait_synced(SYNC_TIMEOUT_SECONDS):
            log.warning("publication Jobs not listed yet; reconciling anyway")
        self._threads = [
            *run_workers(
                self.queue, self.reconciler.reconcile, count=self.settings.model_workers, name="models"
            ),
            self._thread(self._inventory_loop, "inventory"),
            self._thread(self._resync_loop, "models-resync"),
        ]
        log.info("model reconciler started", extra={"workers": self.settings.model_workers})

    def stop(self) -> None:
        self._stop.set()
        self._inventory_now.set()
        self.queue.close()
        self.jobs_informer.stop()
        self.ledger_informer.stop()

    def _thread(self, target: Any, name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread

    # ----- triggers -----------------------------------------------------------------------------

    def _job_changed(self, _name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        key = owner_key(new or old or {})
        if key is not None:
            self.queue.add(key)

    def _ledger_changed(
        self, _name: str, _old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        data = (new or {}).get("data") or {}
        try:
            readable = (
                new is not None
                and ledger_from_json(base64.b64decode(data.get(LEDGER_SECRET_KEY) or "")) is not None
            )
        except (LedgerFormatError, ValueError):
            readable = False
        if not readable:
            log.warning("the ledger Secret was deleted, emptied or damaged; running an inventory pass now")
            self._inventory_now.set()

    def request_inventory(self) -> None:
        self._inventory_now.set()

    # ----- loops --------------------------------------------------------------------------------

    def _inventory_loop(self) -> None:
        while not self._stop.is_set():
            self._inventory_now.clear()
            started = time.monotonic()
            try:
                result = self.inventory.run()
            except Exception as error:
                log.exception("inventory pass crashed")
                result = None
                failure = repr(error)
            if result is not None and result.clean:
                self.metrics.inventory_success.set(1)
                self.metrics.inventory_last_success.set_to_current_time()
                self.metrics.inventory_passes.labels("success").inc()
                log.info(
                    "inventory pass confirmed the ledger",
                    extra={
                        "artifacts": result.artifacts,
                        "stored_bytes": result.stored_bytes,
                        "removed": len(result.removed),
                        "damaged": len(result.damaged),
                        "seconds": round(time.monotonic() - started, 3),
                    },
                )
            else:
                self.metrics.inventory_success.set(0)
                self.metrics.inventory_passes.labels("failure").inc()
                errors = result.errors if result is not None else [failure]
                log.error(
                    "inventory pass found problems; the ledger stays unconfirmed",
                    extra={"errors": errors[:20], "error_count": len(errors)},
                )
            for key, detail in result.damaged if result is not None else ():
                self.reconciler.mark_damaged(key, detail)
                self.queue.add(key)
            self._inventory_now.wait(self.settings.inventory_interval_seconds)

    def _resync_loop(self) -> None:
        while not self._stop.wait(0 if not self._threads else self.settings.model_resync_seconds):
            counts: dict[tuple[str, str], int] = {}
            try:
                for kind in ModelKind:
                    for obj in self.objects.list_all(kind):
                        self.queue.add(key_of(obj))
                        phase = (obj.get("status") or {}).get("phase") or "Pending"
                        counts[(kind.value, phase)] = counts.get((kind.value, phase), 0) + 1
            except Exception as error:
                log.warning("cannot list models for a resync", extra={"error": str(error)})
                continue
            self.metrics.models.clear()
            for (kind_name, phase), count in counts.items():
                self.metrics.models.labels(kind_name, phase).set(count)
