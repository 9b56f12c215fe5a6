"""The reservation rule and the download verdict that dry-runs it."""

from __future__ import annotations

import pytest

from ai_models.domain.storage.ledger import (
    EntryState,
    Ledger,
    LedgerEntry,
    Owner,
    Refusal,
    Scope,
    available_bytes,
    reserve,
)
from ai_models.domain.storage.verdict import Verdict, VerdictReason, download_verdict

GIB = 1024**3
LLAMA = Owner(kind="Model", namespace="team-a", name="llama", uid="u1")
QWEN = Owner(kind="ClusterModel", namespace="", name="qwen", uid="u2")


def confirmed(*entries: LedgerEntry) -> Ledger:
    return Ledger(entries=entries, confirmed=True)


def published(owner: Owner, size: int, scope: Scope = Scope.NAMESPACED) -> LedgerEntry:
    return LedgerEntry(owner=owner, scope=scope, size_bytes=size, state=EntryState.PUBLISHED)


def test_missing_ledger_means_usage_unknown_and_refuses_with_a_budget() -> None:
    outcome = reserve(None, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=GIB, capacity_bytes=10 * GIB)
    assert outcome.refusal is Refusal.STORAGE_USAGE_UNKNOWN
    assert available_bytes(None, capacity_bytes=10 * GIB) is None


def test_unconfirmed_ledger_is_usage_unknown_too() -> None:
    ledger = Ledger(entries=(published(QWEN, GIB, Scope.CLUSTER),), confirmed=False)
    outcome = reserve(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=1, capacity_bytes=10 * GIB)
    assert outcome.refusal is Refusal.STORAGE_USAGE_UNKNOWN


def test_without_a_budget_nothing_is_refused_even_when_usage_is_unknown() -> None:
    outcome = reserve(None, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=GIB, capacity_bytes=None)
    assert outcome.accepted
    assert outcome.ledger is not None
    assert outcome.ledger.confirmed is False
    assert outcome.ledger.bytes_in(EntryState.RESERVED) == GIB


def test_reservation_counts_published_and_reserved_bytes_against_the_budget() -> None:
    ledger = confirmed(published(QWEN, 6 * GIB, Scope.CLUSTER))
    fits = reserve(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=4 * GIB, capacity_bytes=10 * GIB)
    assert fits.accepted
    assert fits.available_bytes == 0
    assert fits.ledger is not None
    other = Owner(kind="Model", namespace="team-b", name="big", uid="u3")
    refused = reserve(fits.ledger, owner=other, scope=Scope.NAMESPACED, size_bytes=1, capacity_bytes=10 * GIB)
    assert refused.refusal is Refusal.INSUFFICIENT_STORAGE
    assert refused.ledger is fits.ledger


def test_repeated_reservation_of_one_owner_replaces_the_previous_one() -> None:
    first = reserve(
        confirmed(), owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=3 * GIB, capacity_bytes=5 * GIB
    )
    assert first.ledger is not None
    again = reserve(
        first.ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=4 * GIB, capacity_bytes=5 * GIB
    )
    assert again.accepted
    assert again.ledger is not None
    assert again.ledger.bytes_in(EntryState.RESERVED) == 4 * GIB


def test_dry_run_leaves_the_ledger_untouched() -> None:
    ledger = confirmed()
    outcome = reserve(
        ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=GIB, capacity_bytes=2 * GIB, dry_run=True
    )
    assert outcome.accepted
    assert outcome.ledger is ledger


def test_negative_size_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="negative size"):
        reserve(confirmed(), owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=-1, capacity_bytes=None)


@pytest.mark.parametrize(
    ("required", "ledger", "capacity", "verdict", "reason"),
    [
        (None, confirmed(), 10 * GIB, Verdict.ESTIMATE_UNAVAILABLE, VerdictReason.SIZE_UNKNOWN),
        (None, None, 10 * GIB, Verdict.ESTIMATE_UNAVAILABLE, VerdictReason.SIZE_UNKNOWN),
        (GIB, confirmed(), 10 * GIB, Verdict.FEASIBLE, VerdictReason.WITHIN_BUDGET),
        (GIB, None, None, Verdict.FEASIBLE, VerdictReason.NO_CAPACITY_LIMIT),
        (GIB, None, 10 * GIB, Verdict.NOT_FEASIBLE, VerdictReason.STORAGE_USAGE_UNKNOWN),
        (11 * GIB, confirmed(), 10 * GIB, Verdict.NOT_FEASIBLE, VerdictReason.INSUFFICIENT_STORAGE),
    ],
)
def test_download_verdict_is_the_dry_run_of_the_reservation(
    required: int | None, ledger: Ledger | None, capacity: int | None, verdict: Verdict, reason: VerdictReason
) -> None:
    result = download_verdict(required, ledger=ledger, capacity_bytes=capacity)
    assert (result.verdict, result.reason, result.required_bytes) == (verdict, reason, required)
