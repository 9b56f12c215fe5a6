"""The Hub token of a ModelCatalogSource: the Secret its spec names, in the module namespace."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException


class TokenSecretMissing(Exception):
    """The Secret named in spec.huggingFace.tokenSecretRef is missing or has no `token` key."""


def source_token(api: Any, namespace: str, body: Mapping[str, Any]) -> str | None:
    """The Hub token of a ModelCatalogSource (Secret `spec.huggingFace.tokenSecretRef` in the module
    namespace, key `token`); None without a reference. Raises TokenSecretMissing naming the fix."""
    reference = ((body.get("spec") or {}).get("huggingFace") or {}).get("tokenSecretRef")
    if not reference:
        return None
    try:
        secret = k8s.CoreV1Api(api).read_namespaced_secret(reference["name"], namespace)
    except ApiException as error:
        if error.status == 404:
            raise TokenSecretMissing(
                f"Secret {namespace}/{reference['name']} named in spec.huggingFace.tokenSecretRef "
                "does not exist; create it with the Hub token under the key `token`"
            ) from error
        raise
    data = secret.data or {}
    if "token" not in data:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} has no key `token`; put the Hub token under that key"
        )
    return base64.b64decode(data["token"]).decode().strip()
