"""Wiring of the storage passes into the one runtime: the ledger Secret's informer and the
inventory loop, on the Lease holder only.

The inventory pass runs every `inventory_interval_seconds`, and at once when the ledger Secret is
deleted, emptied or damaged (its informer says so) or when the manager stops (to wake the loop).
A Ready object whose artifact the pass finds damaged is handed to `on_damaged` (the Model room
publishes it again); this room never touches a Model itself.
"""

from __future__ import annotations

import base64
import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.kube.resources import SECRETS
from ai_models.adapters.objectstore import ObjectStore
from ai_models.controller.accounting import Accounting
from ai_models.controller.runtime import Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.controller.storage.catalogs import CatalogSweep
from ai_models.controller.storage.inventory import InventoryPass, InventoryResult
from ai_models.controller.storage.metrics import StorageMetrics
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.codec import (
    LEDGER_SECRET_KEY,
    LEDGER_SECRET_NAME,
    LedgerFormatError,
    ledger_from_json,
)

log = logging.getLogger(__name__)


class StorageRuntime:
    def __init__(
        self,
        *,
        settings: ControllerSettings,
        api_client: Any,
        store: ObjectStore,
        objects: ModelObjects,
        accounting: Accounting,
        job_cache: Callable[[], list[dict[str, Any]]],
        metrics: StorageMetrics,
        on_damaged: Callable[[ModelKey, str], None],
    ) -> None:
        self._interval = settings.inventory_interval_seconds
        self._metrics = metrics
        self._on_damaged = on_damaged
        grace = datetime.timedelta(seconds=settings.inventory_orphan_grace_seconds)
        self.inventory = InventoryPass(
            store=store,
            objects=objects,
            accounting=accounting,
            job_cache=job_cache,
            grace=grace,
            max_removal_fraction=settings.inventory_max_removal_fraction,
            metrics=metrics,
            catalogs=CatalogSweep(store=store, sources=CatalogSourceObjects(api_client), grace=grace),
        )
        self.ledger_informer = Informer(
            api_client,
            SECRETS,
            namespace=settings.namespace,
            name="ledger",
            field_selector=f"metadata.name={LEDGER_SECRET_NAME}",
        )
        self.ledger_informer.add_handler(self._ledger_changed)
        self._inventory_now = threading.Event()

    def attach(self, manager: Manager) -> None:
        manager.informer(self.ledger_informer)
        manager.loop("inventory", self._inventory_loop)
        manager.on_stopping.append(self.request_inventory)  # wakes the inventory loop to stop

    def request_inventory(self) -> None:
        self._inventory_now.set()

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

    def _inventory_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._inventory_now.clear()
            self._inventory_pass()
            if stop.is_set():
                return
            self._inventory_now.wait(self._interval)

    def _inventory_pass(self) -> None:
        started = time.monotonic()
        try:
            result: InventoryResult | None = self.inventory.run()
        except Exception as error:
            log.exception("inventory pass crashed")
            result = None
            failure = repr(error)
        if result is not None and result.clean:
            self._metrics.inventory_success.set(1)
            self._metrics.inventory_last_success.set_to_current_time()
            self._metrics.inventory_passes.labels("success").inc()
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
            self._metrics.inventory_success.set(0)
            self._metrics.inventory_passes.labels("failure").inc()
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
            self._on_damaged(key, detail)
