"""The catalog's preliminary download verdict: a dry run of the real reservation."""

from __future__ import annotations

import dataclasses
import enum

from ai_models.domain.storage.ledger import Ledger, Owner, Scope, reserve


class Verdict(enum.StrEnum):
    FEASIBLE = "Feasible"
    NOT_FEASIBLE = "NotFeasible"
    ESTIMATE_UNAVAILABLE = "EstimateUnavailable"


class VerdictReason(enum.StrEnum):
    WITHIN_BUDGET = "WithinBudget"
    NO_CAPACITY_LIMIT = "NoCapacityLimit"
    SIZE_UNKNOWN = "SizeUnknown"
    STORAGE_USAGE_UNKNOWN = "StorageUsageUnknown"
    INSUFFICIENT_STORAGE = "InsufficientStorage"


@dataclasses.dataclass(frozen=True)
class DownloadVerdict:
    verdict: Verdict
    reason: VerdictReason
    required_bytes: int | None


# A dry run reserves for nobody in particular; the owner never reaches a stored ledger.
_DRY_RUN_OWNER = Owner(kind="CatalogEntry", namespace="", name="", uid="")


def download_verdict(
    required_bytes: int | None, *, ledger: Ledger | None, capacity_bytes: int | None
) -> DownloadVerdict:
    """Would a download of `required_bytes` be reserved now? Unknown size is never a block."""
    if required_bytes is None:
        return DownloadVerdict(Verdict.ESTIMATE_UNAVAILABLE, VerdictReason.SIZE_UNKNOWN, None)
    outcome = reserve(
        ledger,
        owner=_DRY_RUN_OWNER,
        scope=Scope.NAMESPACED,
        size_bytes=required_bytes,
        capacity_bytes=capacity_bytes,
        dry_run=True,
    )
    if outcome.refusal is not None:
        return DownloadVerdict(Verdict.NOT_FEASIBLE, VerdictReason(outcome.refusal.value), required_bytes)
    reason = VerdictReason.NO_CAPACITY_LIMIT if capacity_bytes is None else VerdictReason.WITHIN_BUDGET
    return DownloadVerdict(Verdict.FEASIBLE, reason, required_bytes)
