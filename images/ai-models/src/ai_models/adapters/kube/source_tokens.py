"""The token of a ModelCatalogSource: the Secret its provider block names, in the module namespace
(`spec.huggingFace.tokenSecretRef` for a Hub, `spec.aiModels.tokenSecretRef` for another
ai-models cluster)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.secrets import Secrets
from ai_models.names import CatalogProvider


class TokenSecretMissing(Exception):
    """The Secret named in the provider block's tokenSecretRef is missing or has no `token` key."""


def _block(body: Mapping[str, Any]) -> tuple[str, str]:
    """The provider block's field name and what its token is, for messages."""
    spec = body.get("spec") or {}
    if spec.get("provider") == CatalogProvider.AI_MODELS:
        return "aiModels", "a token the other ai-models cluster accepts"
    return "huggingFace", "the Hub token"


def source_token(api: Any, namespace: str, body: Mapping[str, Any]) -> str | None:
    """The token of a ModelCatalogSource (Secret `tokenSecretRef` of its provider block, in the
    module namespace, key `token`); None without a reference. Raises TokenSecretMissing naming the fix."""
    block, what = _block(body)
    reference = ((body.get("spec") or {}).get(block) or {}).get("tokenSecretRef")
    if not reference:
        return None
    secret = Secrets(api).read(namespace, reference["name"])
    if secret is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} named in spec.{block}.tokenSecretRef "
            f"does not exist; create it with {what} under the key `token`"
        )
    token = secret.text("token")
    if token is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} has no key `token`; put {what} under that key"
        )
    return token.strip()
