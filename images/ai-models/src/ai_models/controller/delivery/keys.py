"""The work-queue key of the delivery controller: one top-level workload, by kind, namespace, name.

The uid is not part of the key: a workload deleted and created again under the same name is the
same key, and the pass reads whichever incarnation the cache holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ai_models.domain.delivery.contract import WorkloadKind


@dataclasses.dataclass(frozen=True, order=True)
class WorkloadKey:
    kind: WorkloadKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def index_value(self) -> str:
        """The key as an informer index value."""
        return f"{self.kind}/{self.namespace}/{self.name}"


def workload_key(obj: Mapping[str, Any]) -> WorkloadKey:
    meta = obj["metadata"]
    return WorkloadKey(WorkloadKind(str(obj["kind"])), str(meta.get("namespace") or ""), str(meta["name"]))
