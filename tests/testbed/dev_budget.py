"""A storage budget in the dev stack: `AI_MODELS_DEV_CAPACITY_LIMIT` (a Kubernetes quantity such as
`10Mi`) is the module setting `artifacts.capacityLimit`, so reservations, uploads (507) and catalog
verdicts (`NotFeasible`, reason `InsufficientStorage`) answer as in a cluster with that budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.utils import parse_quantity

CAPACITY_VARIABLE = "AI_MODELS_DEV_CAPACITY_LIMIT"
# The process setting the chart renders from artifacts.capacityLimit (templates/_helpers.tpl).
PROCESS_VARIABLE = "AI_MODELS_CAPACITY_LIMIT_BYTES"


class BudgetRefused(ValueError):
    """The budget is not a positive Kubernetes quantity."""


def checked_budget(raw: str | None) -> str | None:
    """The budget as written, or None without one; a bad value names the variable and the fix."""
    if raw is None or not raw.strip():
        return None
    try:
        parsed = parse_quantity(raw.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed <= 0:
        raise BudgetRefused(
            f"{CAPACITY_VARIABLE}={raw!r} is not a storage budget: set a positive Kubernetes quantity "
            "such as 10Mi or 500Gi, or unset it to run without a budget"
        )
    return raw.strip()


def with_budget(settings: Mapping[str, Any], budget: str | None) -> dict[str, Any]:
    """The module settings with `artifacts.capacityLimit` set to `budget` (unchanged without one)."""
    if not budget:
        return dict(settings)
    return {**settings, "artifacts": {**(settings.get("artifacts") or {}), "capacityLimit": budget}}


def budget_env(budget: str | None) -> dict[str, str]:
    """The variable the controller and the api read the budget from, as the chart passes it."""
    return {PROCESS_VARIABLE: budget} if budget else {}
