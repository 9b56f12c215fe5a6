"""Typed access to Models and ClusterModels: one key type, reads, status, finalizers, events.

A failure raises `KubeError`; what is gone meanwhile (a status or finalizer write) or changed since
it was read (a finalizer write) is not one: the next event brings the object back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.objects import REQUEST_TIMEOUT, Objects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS
from ai_models.domain.models.reference import ModelKey, key_of
from ai_models.names import MODEL_FINALIZER, ModelKind

log = logging.getLogger(__name__)


class ModelObjects:
    def __init__(
        self,
        api_client: Any,
        *,
        events: EventRecorder | None = None,
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
    ) -> None:
        self.events = events or EventRecorder(api_client)
        self._kinds = {
            ModelKind.MODEL: Objects(api_client, MODELS, timeout=timeout),
            ModelKind.CLUSTER_MODEL: Objects(api_client, CLUSTER_MODELS, timeout=timeout),
        }

    def get(self, key: ModelKey) -> dict[str, Any] | None:
        return self._kinds[key.kind].get(key.name, _namespace(key))

    def list_all(self, kind: ModelKind) -> list[dict[str, Any]]:
        """Every object of the kind (in every namespace), each with its `kind` set."""
        return list(self._kinds[kind].list_all())

    def patch_status(self, key: ModelKey, status: Mapping[str, Any]) -> None:
        """Merge `status` into the object's status; gone meanwhile: nothing to report on."""
        self._kinds[key.kind].patch(
            key.name, {"status": dict(status)}, _namespace(key), subresource="status", missing_ok=True
        )

    def set_finalizers(self, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace the finalizer list, guarded by the resourceVersion the decision was made on."""
        key = key_of(obj)
        version = obj["metadata"]["resourceVersion"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": version}}
        try:
            self._kinds[key.kind].patch(key.name, patch, _namespace(key))
        except KubeError as error:
            if not (error.not_found or error.conflict):  # gone, or changed: the next event brings it back
                raise

    def add_finalizer(self, obj: Mapping[str, Any]) -> None:
        current = list(obj["metadata"].get("finalizers") or [])
        if MODEL_FINALIZER not in current:
            self.set_finalizers(obj, [*current, MODEL_FINALIZER])

    def remove_finalizer(self, obj: Mapping[str, Any]) -> None:
        current = list(obj["metadata"].get("finalizers") or [])
        if MODEL_FINALIZER in current:
            self.set_finalizers(obj, [item for item in current if item != MODEL_FINALIZER])

    def event(self, obj: Mapping[str, Any], *, type_: str, reason: str, message: str) -> None:
        """Record a Kubernetes Event on the object (through the controller's one recorder)."""
        self.events.record(obj, type_=type_, reason=reason, message=message)


def _namespace(key: ModelKey) -> str | None:
    """A Model's namespace; None for a ClusterModel, which has none."""
    return key.namespace if key.kind is ModelKind.MODEL else None
