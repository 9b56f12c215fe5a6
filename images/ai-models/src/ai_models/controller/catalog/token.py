"""The Hub token of a ModelCatalogSource: the Secret its spec names, in the module namespace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.secrets import Secrets


class TokenSecretMissing(Exception):
    """The Secret named in spec.huggingFace.tokenSecretRef is missing or has no `token` key."""


def source_token(api: Any, namespace: str, body: Mapping[str, Any]) -> str | None:
    """The Hub token of a ModelCatalogSource (Secret `spec.huggingFace.tokenSecretRef` in the module
    namespace, key `token`); None without a reference. Raises TokenSecretMissing naming the fix."""
    reference = ((body.get("spec") or {}).get("huggingFace") or {}).get("tokenSecretRef")
    if not reference:
        return None
    secret = Secrets(api).read(namespace, reference["name"])
    if secret is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} named in spec.huggingFace.tokenSecretRef "
            "does not exist; create it with the Hub token under the key `token`"
        )
    token = secret.text("token")
    if token is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} has no key `token`; put the Hub token under that key"
        )
    return token.strip()
