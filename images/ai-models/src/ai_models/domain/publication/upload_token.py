"""Signed, time-bounded upload tokens (the secret part of `status.upload` URLs).

A token names one object by kind, namespace, name and UID and carries its expiry; it is signed
with HMAC-SHA256 under the key in the Secret `ai-models-upload-signing`. The controller issues
tokens, the upload API verifies them: neither needs to store sessions, and a token for a deleted
and re-created Model is refused because the UID differs.

    token = issue(owner, expires_at=now + timedelta(hours=2), key=key)
    grant = verify(token, key=key, now=now)   # raises UploadTokenRejected
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import hashlib
import hmac
import json

from ai_models.domain.storage.ledger import Owner


class UploadTokenRejected(ValueError):
    """The token is malformed, forged or expired; the message says which, never the key."""


@dataclasses.dataclass(frozen=True)
class UploadGrant:
    owner: Owner
    expires_at: datetime.datetime


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(payload: str, key: bytes) -> str:
    return _b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())


def issue(owner: Owner, *, expires_at: datetime.datetime, key: bytes) -> str:
    if not key:
        raise ValueError("the upload signing key is empty")
    document = {
        "k": owner.kind,
        "n": owner.namespace,
        "m": owner.name,
        "u": owner.uid,
        "e": int(expires_at.timestamp()),
    }
    payload = _b64(json.dumps(document, separators=(",", ":"), sort_keys=True).encode())
    return f"{payload}.{_signature(payload, key)}"


def verify(token: str, *, key: bytes, now: datetime.datetime) -> UploadGrant:
    payload, _, signature = token.partition(".")
    if not payload or not signature or not key:
        raise UploadTokenRejected("the upload token is malformed; copy the URL from status.upload again")
    # Compared as bytes: compare_digest raises TypeError on str with non-ASCII characters.
    if not hmac.compare_digest(signature.encode(), _signature(payload, key).encode()):
        raise UploadTokenRejected("the upload token is not valid; copy the URL from status.upload again")
    try:
        document = json.loads(_unb64(payload))
        owner = Owner(
            kind=str(document["k"]),
            namespace=str(document["n"]),
            name=str(document["m"]),
            uid=str(document["u"]),
        )
        expires_at = datetime.datetime.fromtimestamp(int(document["e"]), tz=datetime.UTC)
    except (binascii.Error, ValueError, KeyError, TypeError) as error:
        raise UploadTokenRejected(
            "the upload token is malformed; copy the URL from status.upload again"
        ) from error
    if now >= expires_at:
        raise UploadTokenRejected(
            f"the upload token expired at {expires_at.isoformat()}; "
            "the controller issues a new URL in status.upload"
        )
    return UploadGrant(owner=owner, expires_at=expires_at)
