"""The storage summary: the ledger snapshot the verdicts use, against the budget (pure).

A number the module does not know is None here and absent in the answer, never 0: capacity
without a budget, usage while the ledger is missing, unreadable or not confirmed by an inventory
pass. The arithmetic is the domain's (`usage_known`, `usage_by_scope`, `available_bytes`), so the
summary cannot disagree with a reservation.
"""

from __future__ import annotations

from ai_models.api.catalog.ledger_view import LedgerSnapshot
from ai_models.api.models import ScopeUsageView, StorageSummary
from ai_models.domain.storage.ledger import EntryState, available_bytes, usage_by_scope, usage_known


def summarize(snapshot: LedgerSnapshot, *, capacity_bytes: int | None) -> StorageSummary:
    ledger = snapshot.reading.ledger
    if ledger is None or not usage_known(ledger):
        return StorageSummary(
            capacityKnown=capacity_bytes is not None,
            usageKnown=False,
            capacityBytes=capacity_bytes,
            snapshotAt=snapshot.read_at,
        )
    return StorageSummary(
        capacityKnown=capacity_bytes is not None,
        usageKnown=True,
        capacityBytes=capacity_bytes,
        usedBytes=ledger.bytes_in(EntryState.PUBLISHED),
        reservedBytes=ledger.bytes_in(EntryState.RESERVED),
        availableBytes=available_bytes(ledger, capacity_bytes=capacity_bytes),
        scopes=[
            ScopeUsageView(
                scope=usage.scope,
                usedBytes=usage.used_bytes,
                reservedBytes=usage.reserved_bytes,
                artifacts=usage.artifacts,
            )
            for usage in usage_by_scope(ledger)
        ],
        snapshotAt=snapshot.read_at,
    )
