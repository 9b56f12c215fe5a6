"""The one reference to a Model or ClusterModel: kind, namespace ("" for a ClusterModel) and name.

Work queues key on it, the api resolves requests to it, and messages name an object by it
("Model team-a/qwen", "ClusterModel qwen"). The ledger's `Owner` is a reference plus the uid of
one incarnation of the object (`Owner.key`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ai_models.names import ModelKind


@dataclasses.dataclass(frozen=True, order=True)
class ModelKey:
    kind: ModelKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def describe(self) -> str:
        """How messages name the object: "Model team-a/qwen", "ClusterModel qwen"."""
        return str(self)


def key_of(obj: Mapping[str, Any]) -> ModelKey:
    meta = obj["metadata"]
    return ModelKey(ModelKind(obj["kind"]), meta.get("namespace") or "", meta["name"])
