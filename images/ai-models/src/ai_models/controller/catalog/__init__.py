"""The ModelCatalogSource controller: a reconciler on the controller runtime (`controller.runtime`).

`catalog_controller` builds it for the manager: one `Controller[str]` keyed by source name, fed by
the informer of ModelCatalogSources, with `workers` passes at a time.
"""

from __future__ import annotations

from ai_models.adapters.kube.informer import Informer
from ai_models.controller.catalog.context import CatalogRuntime, RecordEvent
from ai_models.controller.catalog.reconciler import CatalogSourceReconciler
from ai_models.controller.runtime import Controller

__all__ = [
    "CatalogRuntime",
    "CatalogSourceReconciler",
    "RecordEvent",
    "catalog_controller",
]
CONTROLLER_NAME = "catalog-sources"


def catalog_controller(runtime: CatalogRuntime, *, informer: Informer, workers: int = 4) -> Controller[str]:
    """The catalog source controller on `informer` (cluster-wide ModelCatalogSources); the caller
    adds both to its manager. A worker runs one pass at a time, so `workers` sources index at once."""
    reconciler = CatalogSourceReconciler(runtime=runtime, get_source=lambda name: informer.get("", name))
    controller: Controller[str] = Controller(CONTROLLER_NAME, reconciler.reconcile, workers=workers)
    reconciler.stopping = controller.stopping
    controller.watch(informer, reconciler.keys_of)
    return controller
