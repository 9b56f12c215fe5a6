"""Signed, time-bounded upload tokens (the secret part of `status.upload` URLs).

A token names one object by kind, namespace, name and UID and carries its expiry and a random
issue nonce; it is signed with HMAC-SHA256 under the key in the Secret `ai-models-upload-signing`.
The controller issues tokens, the upload API verifies them: a token for a deleted and re-created
Model is refused because the UID differs. The nonce makes every issued token unique, so the upload
API can tell the URL the object's status holds now from any URL issued before it (D40).

`verify` treats its input as hostile: any string, and any document signed with the key (a leaked
key, a bug in an issuer), ends in a grant or an `UploadTokenRejected`, never another exception.

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
import secrets
from collections.abc import Mapping
from typing import Any, Final

from ai_models.domain.storage.ledger import Owner

NONCE_BYTES: Final = 12
_MALFORMED: Final = "the upload token is malformed; copy the URL from status.upload again"
# What json.loads and datetime can raise on a hostile document: deep nesting (RecursionError), an
# expiry beyond time_t or the calendar (OverflowError, OSError, ValueError).
DECODING_ERRORS: Final = (
    binascii.Error,
    ValueError,
    KeyError,
    TypeError,
    OverflowError,
    OSError,
    RecursionError,
)


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


# The signed-document machinery, shared with the delivery tokens (`domain.delivery.token`).


class MalformedToken(ValueError):
    """Not `<payload>.<signature>` in URL-safe base64, or no key to check it with."""


class ForgedToken(ValueError):
    """The signature does not match the key: forged, damaged, or signed with another key."""


def seal(document: Mapping[str, object], *, key: bytes) -> str:
    """`<payload>.<signature>`: the document as compact JSON in URL-safe base64, HMAC-SHA256 signed."""
    if not key:
        raise ValueError("the signing key is empty")
    payload = _b64(json.dumps(document, separators=(",", ":"), sort_keys=True).encode())
    return f"{payload}.{_signature(payload, key)}"


def unseal(token: str, *, key: bytes) -> Any:
    """The document a genuine token carries (parsed JSON, any shape: the caller checks it);
    raises MalformedToken or ForgedToken, never another exception."""
    payload, _, signature = token.partition(".")
    if not payload or not signature or not key or not token.isascii():
        raise MalformedToken("not a signed token")
    # Compared as bytes: compare_digest raises TypeError on str with non-ASCII characters.
    if not hmac.compare_digest(signature.encode(), _signature(payload, key).encode()):
        raise ForgedToken("the signature does not match")
    try:
        return json.loads(_unb64(payload))
    except DECODING_ERRORS as error:
        raise MalformedToken("the payload is not JSON") from error


def nonce() -> str:
    """A random issue nonce: it makes every issued token unique."""
    return _b64(secrets.token_bytes(NONCE_BYTES))


def issue(owner: Owner, *, expires_at: datetime.datetime, key: bytes) -> str:
    if not key:
        raise ValueError("the upload signing key is empty")
    document = {
        "k": owner.kind,
        "n": owner.namespace,
        "m": owner.name,
        "u": owner.uid,
        "e": int(expires_at.timestamp()),
        "i": nonce(),
    }
    return seal(document, key=key)


def verify(token: str, *, key: bytes, now: datetime.datetime) -> UploadGrant:
    try:
        document = unseal(token, key=key)
    except ForgedToken:
        raise UploadTokenRejected(
            "the upload token is not valid; copy the URL from status.upload again"
        ) from None
    except MalformedToken:
        raise UploadTokenRejected(_MALFORMED) from None
    try:
        owner = Owner(
            kind=_text(document["k"]),
            namespace=_text(document["n"]),
            name=_text(document["m"]),
            uid=_text(document["u"]),
        )
        expiry = document["e"]
        # Exactly an integer (bool is one too in Python): the issuer writes nothing else.
        if type(expiry) is not int:
            raise TypeError("the expiry is not a whole number of seconds")
        expires_at = datetime.datetime.fromtimestamp(expiry, tz=datetime.UTC)
    except DECODING_ERRORS as error:
        raise UploadTokenRejected(_MALFORMED) from error
    if now >= expires_at:
        raise UploadTokenRejected(
            f"the upload token expired at {expires_at.isoformat()}; "
            "the controller issues a new URL in status.upload"
        )
    return UploadGrant(owner=owner, expires_at=expires_at)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("a name in the token is not a string")
    return value
