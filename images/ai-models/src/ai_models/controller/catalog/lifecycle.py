"""The metadata steps of a source: adopting it (our finalizer on, kopf's leftovers off) and, once it
is deleted, removing its index before letting it go."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.catalog.layout import source_prefix
from ai_models.controller.catalog.context import CatalogRuntime
from ai_models.controller.catalog.status import kopf_annotations
from ai_models.names import CATALOG_FINALIZER

log = logging.getLogger(__name__)


class IndexRemovalFailed(Exception):
    """A deleted source's index could not be removed; its finalizer holds the source until it is."""


def _patch_metadata(api: Any, obj: Mapping[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    # The resourceVersion makes it a compare-and-swap: a finalizer list written by someone since
    # is never overwritten (a 409, and the next look starts from the newer object).
    body = {"metadata": {**metadata, "resourceVersion": meta["resourceVersion"]}}
    return CatalogSourceObjects(api).patch(str(meta["name"]), body)


def adopt(runtime: CatalogRuntime, obj: Mapping[str, Any]) -> dict[str, Any]:
    """One patch: our finalizer added (so a deletion waits for the index to be removed) and the
    annotations kopf kept its progress in removed (so an upgraded cluster carries no kopf state)."""
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    metadata: dict[str, Any] = {}
    if CATALOG_FINALIZER not in finalizers:
        metadata["finalizers"] = [*finalizers, CATALOG_FINALIZER]
    leftovers = kopf_annotations(obj)
    if leftovers:
        metadata["annotations"] = dict.fromkeys(leftovers)
    patched = _patch_metadata(runtime.api, obj, metadata)
    if leftovers:
        log.info(
            "removed the annotations the previous controller framework kept on the source",
            extra={"source": meta["name"], "annotations": leftovers},
        )
    return patched


def clean_up(runtime: CatalogRuntime, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The source is deleted: remove its index and forget its metrics, then release the finalizer."""
    name = str(obj["metadata"]["name"])
    prefix = source_prefix(name)
    try:
        removed = runtime.store.delete_prefix(prefix)
    except ObjectStoreError as error:
        raise IndexRemovalFailed(
            f"ModelCatalogSource {name} is deleted, but its index under {prefix} could not be removed "
            f"({error}); the finalizer {CATALOG_FINALIZER} keeps the source until it can be: check the "
            "module's artifacts settings and the bucket"
        ) from error
    runtime.metrics.forget_source(name)
    finalizers = [item for item in obj["metadata"].get("finalizers") or [] if item != CATALOG_FINALIZER]
    patched = _patch_metadata(runtime.api, obj, {"finalizers": finalizers})
    log.info("catalog source deleted, its index removed", extra={"source": name, "objects": removed})
    return patched
