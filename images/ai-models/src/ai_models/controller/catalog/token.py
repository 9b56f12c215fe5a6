"""The token of a ModelCatalogSource: the Secret its provider block names, in the module namespace
(`spec.huggingFace.tokenSecretRef`, a Hub token; `spec.aiModels.tokenSecretRef`, a token the other
cluster's serving API accepts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.secrets import Secrets
from ai_models.names import CatalogProvider


class TokenSecretMissing(Exception):
    """The Secret named in the provider block's tokenSecretRef is missing or has no `token` key."""


def provider_block(body: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The field name and the settings of the provider block `spec.provider` selects."""
    spec = body.get("spec") or {}
    field = "aiModels" if spec.get("provider") == CatalogProvider.AI_MODELS else "huggingFace"
    return field, spec.get(field) or {}


def source_token(api: Any, namespace: str, body: Mapping[str, Any]) -> str | None:
    """The token of a ModelCatalogSource (Secret `spec.<provider block>.tokenSecretRef` in the
    module namespace, key `token`); None without a reference. Raises TokenSecretMissing naming the fix."""
    field, block = provider_block(body)
    reference = block.get("tokenSecretRef")
    if not reference:
        return None
    what = "the Hub token" if field == "huggingFace" else "a token the other cluster's serving API accepts"
    secret = Secrets(api).read(namespace, reference["name"])
    if secret is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} named in spec.{field}.tokenSecretRef "
            f"does not exist; create it with {what} under the key `token`"
        )
    token = secret.text("token")
    if token is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} has no key `token`; put {what} under that key"
        )
    return token.strip()
