"""Typed access to Models and ClusterModels: one key type, reads, status, finalizers, events, Secrets."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.events import EventRecorder
from ai_models.domain.models.reference import ModelKey, key_of
from ai_models.names import API_GROUP, API_VERSION, MODEL_FINALIZER, ModelKind

log = logging.getLogger(__name__)


class ModelObjects:
    def __init__(
        self,
        api_client: Any,
        *,
        events: EventRecorder | None = None,
        timeout: tuple[float, float] = (3, 30),
    ) -> None:
        self._client = api_client
        self.events = events or EventRecorder(api_client)
        self._objects = k8s.CustomObjectsApi(api_client)
        self._core = k8s.CoreV1Api(api_client)
        self._timeout = timeout

    def _call(
        self, namespaced: Callable[..., Any], cluster: Callable[..., Any], key: ModelKey, *args: Any
    ) -> Any:
        """One custom-objects call on the object `key` names: the namespaced form for a Model, the
        cluster form for a ClusterModel (same arguments after the object's path)."""
        if key.kind is ModelKind.MODEL:
            path: tuple[str, ...] = (API_GROUP, API_VERSION, key.namespace, key.kind.plural, key.name)
            return namespaced(*path, *args, _request_timeout=self._timeout)
        return cluster(
            API_GROUP, API_VERSION, key.kind.plural, key.name, *args, _request_timeout=self._timeout
        )

    def get(self, key: ModelKey) -> dict[str, Any] | None:
        try:
            found = self._call(
                self._objects.get_namespaced_custom_object, self._objects.get_cluster_custom_object, key
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        result: dict[str, Any] = found
        return result

    def list_all(self, kind: ModelKind) -> list[dict[str, Any]]:
        listed = self._objects.list_cluster_custom_object(
            API_GROUP, API_VERSION, kind.plural, _request_timeout=self._timeout
        )
        items: list[dict[str, Any]] = listed.get("items", [])
        for item in items:
            item.setdefault("kind", kind.value)
        return items

    def patch_status(self, key: ModelKey, status: Mapping[str, Any]) -> None:
        try:
            self._call(
                self._objects.patch_namespaced_custom_object_status,
                self._objects.patch_cluster_custom_object_status,
                key,
                {"status": dict(status)},
            )
        except ApiException as error:
            if error.status != 404:  # gone meanwhile: nothing to report on
                raise

    def _patch(self, key: ModelKey, body: Any) -> None:
        self._call(
            self._objects.patch_namespaced_custom_object, self._objects.patch_cluster_custom_object, key, body
        )

    def set_finalizers(self, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace the finalizer list, guarded by the resourceVersion the decision was made on."""
        meta = obj["metadata"]
        try:
            self._patch(
                key_of(obj),
                {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}},
            )
        except ApiException as error:
            if error.status not in (404, 409):  # gone, or changed: the next event brings it back
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
