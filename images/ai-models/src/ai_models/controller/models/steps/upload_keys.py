"""The upload signing key: read from its Secret in the module namespace, created on first use (the
api reads the same Secret to check the tokens in upload URLs)."""

from __future__ import annotations

import base64
import secrets
import threading
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.names import (
    HERITAGE,
    HERITAGE_LABEL,
    MODULE,
    MODULE_LABEL,
    UPLOAD_SIGNING_KEY,
    UPLOAD_SIGNING_SECRET,
)


class UploadKeys:
    def __init__(self, api_client: Any, *, namespace: str) -> None:
        self._core = k8s.CoreV1Api(api_client)
        self._namespace = namespace
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def key(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._read_or_create()
            return self._key

    def _read(self) -> bytes:
        try:
            secret = self._core.read_namespaced_secret(UPLOAD_SIGNING_SECRET, self._namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return b""
        return base64.b64decode((secret.data or {}).get(UPLOAD_SIGNING_KEY, ""))

    def _read_or_create(self) -> bytes:
        key = self._read()
        if key:
            return key
        key = secrets.token_bytes(32)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": UPLOAD_SIGNING_SECRET,
                "namespace": self._namespace,
                "labels": {MODULE_LABEL: MODULE, HERITAGE_LABEL: HERITAGE},
            },
            "type": "Opaque",
            "data": {UPLOAD_SIGNING_KEY: base64.b64encode(key).decode()},
        }
        try:
            self._core.create_namespaced_secret(self._namespace, body)
        except ApiException as error:
            if error.status != 409:
                raise
            return self._read()  # another replica created it first
        return key
