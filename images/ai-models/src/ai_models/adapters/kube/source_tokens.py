"""The token of a ModelCatalogSource: the Secret its provider block names, in the module namespace
(`spec.huggingFace.tokenSecretRef` for a Hub, `spec.aiModels.tokenSecretRef` for another
ai-models cluster).

A source never reaches the module's own Secrets (the reserved names are refused before any read),
and the controller reads the others only where the cluster administrator granted it by name
(D160): a refusal of the API server is the source's problem to report, with the grant to make.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.secrets import Secrets
from ai_models.domain.secret_reads import module_secret_refusal, read_refused
from ai_models.names import CatalogProvider


class TokenSecretMissing(Exception):
    """The Secret named in the provider block's tokenSecretRef cannot give the token: it is missing,
    has no `token` key, is one of the module's own, or the controller may not read it."""


def _block(body: Mapping[str, Any]) -> tuple[str, str]:
    """The provider block's field name and what its token is, for messages."""
    spec = body.get("spec") or {}
    if spec.get("provider") == CatalogProvider.AI_MODELS:
        return "aiModels", "a token the other ai-models cluster accepts"
    return "huggingFace", "the Hub token"


def source_token(api: Any, namespace: str, body: Mapping[str, Any]) -> str | None:
    """The token of a ModelCatalogSource (Secret `tokenSecretRef` of its provider block, in the
    module namespace, key `token`); None without a reference. Raises TokenSecretMissing naming the fix,
    and KubeError when the API server cannot answer now."""
    block, what = _block(body)
    reference = ((body.get("spec") or {}).get(block) or {}).get("tokenSecretRef")
    if not reference:
        return None
    field = f"spec.{block}.tokenSecretRef"
    refusal = module_secret_refusal(reference["name"], field=field)
    if refusal is not None:
        raise TokenSecretMissing(refusal)
    try:
        secret = Secrets(api).read(namespace, reference["name"])
    except KubeError as error:
        if not error.forbidden:
            raise
        raise TokenSecretMissing(read_refused(namespace, reference["name"], field=field)) from None
    if secret is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} named in {field} "
            f"does not exist; create it with {what} under the key `token`"
        )
    token = secret.text("token")
    if token is None:
        raise TokenSecretMissing(
            f"Secret {namespace}/{reference['name']} has no key `token`; put {what} under that key"
        )
    return token.strip()
