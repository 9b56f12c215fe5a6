"""Wiring of the model reconciler into the one runtime: informers, the controller, the inventory.

Models and ClusterModels are followed cluster-wide, the publication Jobs and the ledger Secret in
the module namespace (a namespaced Role). A Job's change enqueues its owner; a ModelCatalogSource's
change enqueues the objects that publish from it (an index by source name), so a Model that waited
for a source or an entry is retried as soon as the source serves. Everything runs on the Lease
holder only: `attach` adds it all to the leader's `Manager`.
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, JOBS, MODELS, SECRETS
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.models.jobs import JobApi, JobLimits, owner_key, pod_template_from_setting
from ai_models.controller.models.planning import Planner, SnapshotReader
from ai_models.controller.models.reconciler import Reconciler, ReconcilerSettings
from ai_models.controller.runtime import Controller, Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.controller.storage.accounting import Accounting
from ai_models.controller.storage.catalogs import CatalogSweep
from ai_models.controller.storage.inventory import InventoryPass
from ai_models.controller.storage.metrics import StorageMetrics
from ai_models.domain.models.reference import ModelKey, key_of
from ai_models.domain.models.source import catalog_source_of
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    LedgerFormatError,
    ledger_from_json,
)
from ai_models.names import COMPONENT_LABEL, PUBLICATION_COMPONENT, ModelKind

log = logging.getLogger(__name__)
BY_CATALOG_SOURCE = "catalog-source"
METRICS_SECONDS = 15.0


def _by_catalog_source(obj: Mapping[str, Any]) -> list[str]:
    name = catalog_source_of(obj)
    return [name] if name else []


class ModelRuntime:
    def __init__(
        self,
        *,
        settings: ControllerSettings,
        api_client: Any,
        store: ObjectStore,
        metrics: StorageMetrics,
        snapshot: SnapshotReader,
        events: EventRecorder | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        namespace = settings.namespace
        self.objects = ModelObjects(api_client, events=events)
        self.models_informers = {
            kind: Informer(
                api_client,
                resource,
                indexers={BY_CATALOG_SOURCE: _by_catalog_source},
                resync_seconds=settings.model_resync_seconds,
            )
            for kind, resource in ((ModelKind.MODEL, MODELS), (ModelKind.CLUSTER_MODEL, CLUSTER_MODELS))
        }
        self.accounting = Accounting(
            SecretLedgerStore(api_client, namespace=namespace), capacity_bytes=settings.capacity_limit_bytes
        )
        self.jobs_informer = Informer(
            api_client,
            JOBS,
            namespace=namespace,
            name="publication-jobs",
            label_selector=f"{COMPONENT_LABEL}={PUBLICATION_COMPONENT}",
        )
        self.ledger_informer = Informer(
            api_client,
            SECRETS,
            namespace=namespace,
            name="ledger",
            field_selector=f"metadata.name={LEDGER_SECRET_NAME}",
        )
        self.ledger_informer.add_handler(self._ledger_changed)
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
        grace = datetime.timedelta(seconds=settings.inventory_orphan_grace_seconds)
        self.inventory = InventoryPass(
            store=store,
            objects=self.objects,
            accounting=self.accounting,
            job_cache=self.jobs_informer.objects,
            grace=grace,
            max_removal_fraction=settings.inventory_max_removal_fraction,
            metrics=metrics,
            catalogs=CatalogSweep(store=store, sources=CatalogSourceObjects(api_client), grace=grace),
        )
        self.controller: Controller[ModelKey] = Controller(
            "models", self.reconciler.reconcile, workers=settings.model_workers
        )
        self._inventory_now = threading.Event()

    def _wake(self, keys: set[ModelKey]) -> None:
        for key in keys:
            self.controller.enqueue(key)

    def _pod_template(self) -> Mapping[str, Any]:
        return pod_template_from_setting(
            self.settings.publish_pod_template_file,
            variable=ControllerSettings.variable("publish_pod_template_file"),
        )

    # ----- wiring -------------------------------------------------------------------------------

    def attach(self, manager: Manager, *, catalog_sources: Informer | None = None) -> None:
        """Add the informers, the controller and the loops to the leader's manager; with the
        ModelCatalogSource informer, a source's change retries the objects that publish from it."""
        for informer in self.models_informers.values():
            manager.informer(informer)
            self.controller.watch(informer, lambda obj: [key_of(obj)])
        manager.informer(self.jobs_informer)
        self.controller.watch(self.jobs_informer, self._owners_of_job)
        manager.informer(self.ledger_informer)
        if catalog_sources is not None:
            catalog_sources.add_handler(self._catalog_source_changed)
        manager.controller(self.controller)
        manager.loop("inventory", self._inventory_loop)
        manager.loop("models-metrics", self._metrics_loop)
        manager.on_stopping.append(self.request_inventory)  # wakes the inventory loop to stop

    # ----- triggers -----------------------------------------------------------------------------

    @staticmethod
    def _owners_of_job(job: Mapping[str, Any]) -> list[ModelKey]:
        key = owner_key(job)
        return [key] if key is not None else []

    def _catalog_source_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        if old is not None and new is not None and old.get("status") == new.get("status"):
            return  # neither appeared nor served anything new; a resync or a metadata change
        source = (new or old or {}).get("metadata", {}).get("name")
        if not source:
            return
        for informer in self.models_informers.values():
            for obj in informer.by_index(BY_CATALOG_SOURCE, source):
                self.controller.enqueue(key_of(obj))

    def _ledger_changed(self, _old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
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

    # ----- loops --------------------------------------------------------------------------------

    def _inventory_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._inventory_now.clear()
            self._inventory_pass()
            if stop.is_set():
                return
            self._inventory_now.wait(self.settings.inventory_interval_seconds)

    def request_inventory(self) -> None:
        self._inventory_now.set()

    def _inventory_pass(self) -> None:
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
        catalogs = result.catalogs if result is not None else None
        if catalogs is not None and catalogs.errors:
            # Not the ledger's problem: a catalog index left for the next pass costs no accounting.
            log.warning(
                "inventory pass could not look at every catalog index; the next pass tries again",
                extra={"errors": catalogs.errors[:20], "error_count": len(catalogs.errors)},
            )
        for key, detail in result.damaged if result is not None else ():
            self.reconciler.mark_damaged(key, detail)
            self.controller.enqueue(key)

    def _metrics_loop(self, stop: threading.Event) -> None:
        """Objects by kind and phase, counted from the informers' caches (no API calls)."""
        while True:
            counts: dict[tuple[str, str], int] = {}
            for kind, informer in self.models_informers.items():
                for obj in informer.objects():
                    phase = (obj.get("status") or {}).get("phase") or "Pending"
                    counts[(kind.value, phase)] = counts.get((kind.value, phase), 0) + 1
            self.metrics.models.clear()
            for (kind_name, phase), count in counts.items():
                self.metrics.models.labels(kind_name, phase).set(count)
            if stop.wait(METRICS_SECONDS):
                return
