"""Typed access to Secrets by name: read one (its data decoded, its resourceVersion), create one, or
put one (create, or replace the one of that name).

The controller never lists or watches Secrets outside its own namespace: a user's Secret is read by
the name the user's object gives, so RBAC can stay at `get`. A failure raises `KubeError`.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import SECRETS


@dataclasses.dataclass(frozen=True)
class SecretData:
    values: Mapping[str, bytes]
    resource_version: str

    def text(self, key: str) -> str | None:
        """The value under `key` as text (undecodable bytes replaced), or None without that key."""
        value = self.values.get(key)
        return value.decode("utf-8", errors="replace") if value is not None else None


class Secrets:
    def __init__(self, api_client: Any) -> None:
        self._secrets = Objects(api_client, SECRETS)

    def read(self, namespace: str, name: str) -> SecretData | None:
        """The Secret's data, base64-decoded; None when there is no such Secret."""
        secret = self._secrets.get(name, namespace)
        if secret is None:
            return None
        return SecretData(
            values={key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()},
            resource_version=str((secret.get("metadata") or {}).get("resourceVersion") or ""),
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
        return self._secrets.create(body, exists_ok=True) is not None

    def put(self, secret: Mapping[str, Any]) -> None:
        """Create the Secret, or replace the one of that name (an earlier attempt's)."""
        if self._secrets.create(secret, exists_ok=True) is None:
            self._secrets.replace(secret)
