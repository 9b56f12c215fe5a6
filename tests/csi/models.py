"""Models and ClusterModels in the API emulator, with the status the controller would write."""

from __future__ import annotations

from typing import Any

from ai_models.domain.models.reference import ModelKey
from ai_models.names import API_GROUP, API_VERSION, ModelKind, ModelPhase
from kubeemu.pytest_fixtures import RunningEmulator


class ClusterModels:
    """Creates Models and ClusterModels in the emulator and sets their status as the controller would."""

    def __init__(self, emulator: RunningEmulator) -> None:
        self.emulator = emulator

    def put(
        self, key: ModelKey, *, phase: ModelPhase = ModelPhase.READY, digest: str = "", size_bytes: int = 1
    ) -> None:
        metadata: dict[str, Any] = {"name": key.name}
        if key.kind is ModelKind.MODEL:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": key.namespace}}
            self.emulator.cluster.apply(namespace)
            metadata["namespace"] = key.namespace
        self.emulator.cluster.apply(
            {
                "apiVersion": f"{API_GROUP}/{API_VERSION}",
                "kind": key.kind.value,
                "metadata": metadata,
                "spec": {"source": {"upload": {}}},
            }
        )
        status: dict[str, Any] = {"phase": phase.value}
        if digest:
            status["artifact"] = {"uri": f"s3://bucket/{digest}", "digest": digest, "sizeBytes": size_bytes}
        code, _, body = self.emulator.request(
            "PATCH",
            f"{self.path(key)}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )
        assert code == 200, body

    def delete(self, key: ModelKey) -> None:
        code, _, body = self.emulator.request("DELETE", self.path(key))
        assert code == 200, body

    @staticmethod
    def path(key: ModelKey) -> str:
        base = f"/apis/{API_GROUP}/{API_VERSION}"
        if key.kind is ModelKind.MODEL:
            return f"{base}/namespaces/{key.namespace}/{key.kind.plural}/{key.name}"
        return f"{base}/{key.kind.plural}/{key.name}"
