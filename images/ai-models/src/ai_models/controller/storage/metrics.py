"""Storage metrics: the ledger as every replica reads it on each scrape, the inventory pass as the
leader last ran it.

Unknown is absent, never 0: without a ledger there are no used/reserved series, without a budget
no capacity series. The alerts key on `..._ledger_present` and `..._ledger_confirmed`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ai_models.adapters.kube.ledger_store import LedgerStoreError, SecretLedgerStore
from ai_models.domain.storage.ledger import usage_by_scope
from ai_models.names import (
    INVENTORY_LAST_SUCCESS_METRIC,
    INVENTORY_ORPHANED_ARTIFACTS_METRIC,
    INVENTORY_ORPHANED_BYTES_METRIC,
    INVENTORY_PASS_SUCCESS_METRIC,
    INVENTORY_PASSES_METRIC,
    INVENTORY_REMOVAL_BLOCKED_METRIC,
    INVENTORY_REMOVED_ARTIFACTS_METRIC,
    INVENTORY_REMOVED_BYTES_METRIC,
    STORAGE_ARTIFACTS_METRIC,
    STORAGE_CAPACITY_METRIC,
    STORAGE_LEDGER_CONFIRMED_METRIC,
    STORAGE_LEDGER_PRESENT_METRIC,
    STORAGE_RESERVED_METRIC,
    STORAGE_USED_METRIC,
)

log = logging.getLogger(__name__)

CAPACITY = STORAGE_CAPACITY_METRIC
LEDGER_PRESENT = STORAGE_LEDGER_PRESENT_METRIC
LEDGER_CONFIRMED = STORAGE_LEDGER_CONFIRMED_METRIC
USED = STORAGE_USED_METRIC
RESERVED = STORAGE_RESERVED_METRIC
ARTIFACTS = STORAGE_ARTIFACTS_METRIC
# What the collector may export (the monitoring contract; series appear only when known).
LEDGER_METRICS = frozenset({CAPACITY, LEDGER_PRESENT, LEDGER_CONFIRMED, USED, RESERVED, ARTIFACTS})


class LedgerCollector(Collector):
    def __init__(self, store: SecretLedgerStore, *, capacity_bytes: int | None) -> None:
        self._store = store
        self._capacity = capacity_bytes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self._capacity is not None:
            yield GaugeMetricFamily(
                CAPACITY,
                "The storage budget for artifacts (aiModels.artifacts.capacityLimit).",
                value=self._capacity,
            )
        try:
            stored = self._store.read()
        except LedgerStoreError as error:
            log.warning("cannot read the ledger for metrics", extra={"error": str(error)})
            return
        ledger = stored.ledger
        yield GaugeMetricFamily(
            LEDGER_PRESENT,
            "1 when the storage ledger Secret exists with a readable ledger.",
            value=1 if ledger is not None else 0,
        )
        yield GaugeMetricFamily(
            LEDGER_CONFIRMED,
            "1 when the last complete inventory pass confirmed the ledger (usage known).",
            value=1 if ledger is not None and ledger.confirmed else 0,
        )
        if ledger is None:
            return
        used = GaugeMetricFamily(USED, "Bytes of published artifacts, per scope.", labels=["scope"])
        reserved = GaugeMetricFamily(
            RESERVED,
            "Bytes reserved for publications in progress.",
            labels=["scope"],
        )
        artifacts = GaugeMetricFamily(ARTIFACTS, "Published artifacts, per scope.", labels=["scope"])
        for usage in usage_by_scope(ledger):
            used.add_metric([usage.scope.value], usage.used_bytes)
            reserved.add_metric([usage.scope.value], usage.reserved_bytes)
            artifacts.add_metric([usage.scope.value], usage.artifacts)
        yield used
        yield reserved
        yield artifacts


class StorageMetrics:
    """What the leader's inventory pass exports."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.inventory_success = Gauge(
            INVENTORY_PASS_SUCCESS_METRIC,
            "1 when the last inventory pass completed without an error, 0 when it had errors.",
            registry=registry,
        )
        self.inventory_last_success = Gauge(
            INVENTORY_LAST_SUCCESS_METRIC,
            "When an inventory pass last completed without an error.",
            registry=registry,
        )
        self.inventory_passes = Counter(
            INVENTORY_PASSES_METRIC,
            "Inventory passes by result.",
            ["result"],
            registry=registry,
        )
        self.removed_artifacts = Counter(
            INVENTORY_REMOVED_ARTIFACTS_METRIC,
            "Artifacts, partial artifacts and staged uploads inventory passes removed as unowned.",
            registry=registry,
        )
        self.removed_bytes = Counter(
            INVENTORY_REMOVED_BYTES_METRIC,
            "Bytes inventory passes removed as unowned.",
            registry=registry,
        )
        self.orphaned_artifacts = Gauge(
            INVENTORY_ORPHANED_ARTIFACTS_METRIC,
            "What the last inventory pass found unowned and kept (within the grace period or held back).",
            registry=registry,
        )
        self.orphaned_bytes = Gauge(
            INVENTORY_ORPHANED_BYTES_METRIC,
            "Bytes the last inventory pass found unowned and kept.",
            registry=registry,
        )
        self.removal_blocked = Gauge(
            INVENTORY_REMOVAL_BLOCKED_METRIC,
            "1 when the last inventory pass held back removals that would take most of the store at once.",
            registry=registry,
        )
