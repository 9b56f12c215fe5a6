"""Wiring of the model reconciler into the one runtime: informers, the controller, the metrics.

Models and ClusterModels are followed cluster-wide, the publication Jobs in the module namespace
(a namespaced Role). A Job's change enqueues its owner; a ModelCatalogSource's
change enqueues the objects that publish from it (an index by source name), so a Model that waited
for a source or an entry is retried as soon as the source serves. Everything runs on the Lease
holder only: `attach` adds it all to the leader's `Manager`.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, JOBS, MODELS
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.accounting import Accounting
from ai_models.controller.jobs.builder import JobLimits
from ai_models.controller.models.jobs import JobApi, owner_key, publisher_template
from ai_models.controller.models.metrics import ModelMetrics
from ai_models.controller.models.planning import Planner, SnapshotReader
from ai_models.controller.models.reconciler import Reconciler, ReconcilerSettings
from ai_models.controller.runtime import Controller, Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.models.reference import ModelKey, key_of
from ai_models.domain.models.source import catalog_source_of
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
        metrics: ModelMetrics,
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
        self.controller: Controller[ModelKey] = Controller(
            "models", self.reconciler.reconcile, workers=settings.model_workers
        )

    def _wake(self, keys: set[ModelKey]) -> None:
        for key in keys:
            self.controller.enqueue(key)

    def _pod_template(self) -> Mapping[str, Any]:
        return publisher_template(
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
        if catalog_sources is not None:
            catalog_sources.add_handler(self._catalog_source_changed)
        manager.controller(self.controller)
        manager.loop("models-metrics", self._metrics_loop)

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

    def damaged(self, key: ModelKey, detail: str) -> None:
        """The inventory pass found the artifact of this Ready object damaged: publish it again."""
        self.reconciler.mark_damaged(key, detail)
        self.controller.enqueue(key)

    # ----- loops --------------------------------------------------------------------------------

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
