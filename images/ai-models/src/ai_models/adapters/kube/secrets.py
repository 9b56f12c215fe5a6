"""Typed access to Secrets by name: read one (its data decoded, its resourceVersion), create one.

The controller never lists or watches Secrets outside its own namespace: a user's Secret is read by
the name the user's object gives, so RBAC can stay at `get`.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException


@dataclasses.dataclass(frozen=True)
class SecretData:
    values: Mapping[str, bytes]
    resource_version: str

    def text(self, key: str) -> str | None:
        """The value under `key` as text (undecodable bytes replaced), or None without that key."""
        value = self.values.get(key)
        return value.decode("utf-8", errors="replace") if value is not None else None


class Secrets:
    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = (3, 10)) -> None:
        self._core = k8s.CoreV1Api(api_client)
        self._timeout = timeout

    def read(self, namespace: str, name: str) -> SecretData | None:
        """The Secret's data, base64-decoded; None when there is no such Secret."""
        try:
            secret = self._core.read_namespaced_secret(name, namespace, _request_timeout=self._timeout)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return SecretData(
            values={key: base64.b64decode(value) for key, value in (secret.data or {}).items()},
            resource_version=str(secret.metadata.resource_version or ""),
        )

    def create(
        self, namespace: str, name: str, values: Mapping[str, bytes], *, labels: Mapping[str, str]
    ) -> bool:
        """Create an Opaque Secret; False when one of that name exists already (it is left as it is)."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "type": "Opaque",
            "data": {key: base64.b64encode(value).decode() for key, value in values.items()},
        }
        try:
            self._core.create_namespaced_secret(namespace, body, _request_timeout=self._timeout)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True
