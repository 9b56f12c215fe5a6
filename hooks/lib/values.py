"""Reading module values and snapshots, and writing `aiModels.internal` (plain dicts, JSON-ready)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.names import MODULE

VALUES_KEY = "aiModels"
QUEUE = f"/modules/{MODULE}"


def dig(values: Mapping[str, Any], *path: str) -> Any:
    """The value at `path`, or None when any step is missing (never creates keys)."""
    node: Any = values
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def setting(values: Mapping[str, Any], *path: str) -> Any:
    """A module value (`aiModels.<path>`), or None."""
    return dig(values, VALUES_KEY, *path)


def internal(values: dict[str, Any]) -> dict[str, Any]:
    """`aiModels.internal` of the hook's values copy, created when absent."""
    module: dict[str, Any] = values.setdefault(VALUES_KEY, {})
    result: dict[str, Any] = module.setdefault("internal", {})
    return result


def filter_results(snapshots: Mapping[str, Any], binding: str) -> list[dict[str, Any]]:
    """The jqFilter results of one binding's snapshot (objects a filter mapped to null are skipped)."""
    return [
        item["filterResult"]
        for item in snapshots.get(binding, [])
        if isinstance(item, Mapping) and isinstance(item.get("filterResult"), dict)
    ]
