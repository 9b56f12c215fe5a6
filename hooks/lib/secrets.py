"""The binding of hooks that copy Secrets out of d8-system (where administrators keep them)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.names import DECKHOUSE_NAMESPACE
from lib.values import filter_results

SOURCE_NAMESPACE = DECKHOUSE_NAMESPACE


def source_secrets_binding(
    name: str, *, keys: Sequence[str], include_snapshots_from: Sequence[str], queue: str
) -> dict[str, Any]:
    """A binding on the Secrets of d8-system, Helm's release Secrets left out, whose jqFilter keeps
    each Secret's name and only `keys` of its data: nothing else of d8-system stays in memory."""
    picked = ", ".join(json.dumps(key) for key in keys)
    return {
        "name": name,
        "apiVersion": "v1",
        "kind": "Secret",
        "namespace": {"nameSelector": {"matchNames": [SOURCE_NAMESPACE]}},
        "labelSelector": {"matchExpressions": [{"key": "owner", "operator": "NotIn", "values": ["helm"]}]},
        "keepFullObjectsInMemory": False,
        "includeSnapshotsFrom": list(include_snapshots_from),
        "queue": queue,
        "jqFilter": (
            f"{{name: .metadata.name, data: ((.data // {{}}) | {{{picked}}}"
            " | with_entries(select(.value != null)))}"
        ),
    }


def secrets_by_name(snapshots: Mapping[str, Any], binding: str) -> dict[str, Mapping[str, str]]:
    """The Secrets of a binding whose jqFilter gives `{name, data}`: their data by name."""
    return {str(item["name"]): item.get("data") or {} for item in filter_results(snapshots, binding)}
