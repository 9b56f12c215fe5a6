"""A signing key of the module: read from its Secret in the module namespace, created on first use
(the api reads the same Secret to check the tokens). The Model room signs upload URLs with the
upload signing key (`UPLOAD_SIGNING_SECRET`), the delivery room its materializers' tokens with the
delivery signing key (`DELIVERY_SIGNING_SECRET`)."""

from __future__ import annotations

import secrets
import threading
from typing import Any

from ai_models.adapters.kube.secrets import Secrets
from ai_models.names import (
    MODULE_OBJECT_LABELS,
)


class SigningKeys:
    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        secret: str,
        data_key: str,
    ) -> None:
        self._secrets = Secrets(api_client)
        self._namespace = namespace
        self._secret = secret
        self._data_key = data_key
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def key(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._read_or_create()
            return self._key

    def _read(self) -> bytes:
        secret = self._secrets.read(self._namespace, self._secret)
        return (secret.values.get(self._data_key) or b"") if secret is not None else b""

    def _read_or_create(self) -> bytes:
        key = self._read()
        if key:
            return key
        key = secrets.token_bytes(32)
        labels = MODULE_OBJECT_LABELS
        if not self._secrets.create(self._namespace, self._secret, {self._data_key: key}, labels=labels):
            return self._read()  # another replica created it first
        return key
