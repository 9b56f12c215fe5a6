"""Delivery tokens: the short-lived credential a materialize Job reads artifacts with (D86).

A token names the workload it was issued for (namespace, kind, name, UID) and the artifacts that
workload uses, each as a Model or ClusterModel reference and the digest it had when the token was
issued, and carries its expiry and a random issue nonce. It is signed with HMAC-SHA256 under the
key in the Secret `ai-models-delivery-signing` of the module namespace, with the machinery of the
upload tokens (`domain.publication.upload_token.seal`). The controller issues a token per
materialize Job and hands it over in a Secret of the workload namespace; the serving API verifies
it and serves exactly the listed artifacts, and only while each object still has the listed digest.

A Model in a token is honoured only in the token's own namespace: a workload reads the Models of
its namespace and ClusterModels, whatever a (buggy or leaked-key) issuer listed.

    token = issue(grant, key=key)                 # grant.expires_at: now + DEFAULT_LIFETIME
    grant = verify(token, key=key, now=now)       # raises DeliveryTokenRejected
    grant.digest_of(ModelKey(...))                # the granted digest, or None

`verify` treats its input as hostile: any string ends in a grant or a `DeliveryTokenRejected`.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.upload_token import (
    DECODING_ERRORS,
    ForgedToken,
    MalformedToken,
    nonce,
    seal,
    unseal,
)
from ai_models.names import ModelKind

# Kubernetes tokens are JWTs (three base64url parts) and upload tokens two: the prefix tells a
# delivery token apart before anything is sent to a TokenReview.
PREFIX: Final = "aimd1."
DEFAULT_LIFETIME: Final = datetime.timedelta(hours=1)
MAX_ARTIFACTS: Final = 64
_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
_MALFORMED: Final = "the delivery token is malformed"
_RENEW: Final = "the controller issues a new token with the next materialize Job"


class DeliveryTokenRejected(ValueError):
    """Malformed, forged or expired; `expired` tells the last apart. The message never has the key."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclasses.dataclass(frozen=True)
class GrantedArtifact:
    ref: ModelKey
    digest: str


@dataclasses.dataclass(frozen=True)
class DeliveryGrant:
    workload: Workload
    artifacts: tuple[GrantedArtifact, ...]
    expires_at: datetime.datetime

    def digest_of(self, ref: ModelKey) -> str | None:
        """The digest the token grants for `ref`; None when it does not list `ref`, or lists a
        Model of another namespace than the workload's."""
        if ref.kind is ModelKind.MODEL and ref.namespace != self.workload.namespace:
            return None
        for artifact in self.artifacts:
            if artifact.ref == ref:
                return artifact.digest
        return None


def is_delivery_token(token: str) -> bool:
    return token.startswith(PREFIX)


def issue(grant: DeliveryGrant, *, key: bytes) -> str:
    if not key:
        raise ValueError("the delivery signing key is empty")
    workload = grant.workload
    document = {
        "w": [workload.kind.value, workload.namespace, workload.name, workload.uid],
        "a": [
            [item.ref.kind.value, item.ref.namespace, item.ref.name, item.digest] for item in grant.artifacts
        ],
        "e": int(grant.expires_at.timestamp()),
        "i": nonce(),
    }
    return PREFIX + seal(document, key=key)


def verify(token: str, *, key: bytes, now: datetime.datetime) -> DeliveryGrant:
    if not is_delivery_token(token):
        raise DeliveryTokenRejected(_MALFORMED)
    try:
        document = unseal(token[len(PREFIX) :], key=key)
    except ForgedToken:
        raise DeliveryTokenRejected(
            f"the delivery token is not genuine (not signed with the current delivery signing key); {_RENEW}"
        ) from None
    except MalformedToken:
        raise DeliveryTokenRejected(_MALFORMED) from None
    try:
        grant = _grant(document)
    except DECODING_ERRORS as error:
        raise DeliveryTokenRejected(_MALFORMED) from error
    if now >= grant.expires_at:
        raise DeliveryTokenRejected(
            f"the delivery token of {grant.workload.describe()} expired at "
            f"{grant.expires_at.isoformat()}; {_RENEW}",
            expired=True,
        )
    return grant


def _grant(document: Any) -> DeliveryGrant:
    if not isinstance(document, Mapping):
        raise TypeError("the token is not a JSON object")
    kind, namespace, name, uid = (_text(part) for part in _list(document["w"], length=4))
    listed = _list(document["a"])
    if len(listed) > MAX_ARTIFACTS:
        raise ValueError("the token lists too many artifacts")
    artifacts = []
    for item in listed:
        model_kind, model_namespace, model_name, digest = (_text(part) for part in _list(item, length=4))
        if not _DIGEST.match(digest):
            raise ValueError("an artifact digest is not sha256:<hex>")
        ref = ModelKey(ModelKind(model_kind), model_namespace, model_name)
        artifacts.append(GrantedArtifact(ref=ref, digest=digest))
    expiry = document["e"]
    # Exactly an integer (bool is one too in Python): the issuer writes nothing else.
    if type(expiry) is not int:
        raise TypeError("the expiry is not a whole number of seconds")
    return DeliveryGrant(
        workload=Workload(WorkloadKind(kind), namespace, name, uid),
        artifacts=tuple(artifacts),
        expires_at=datetime.datetime.fromtimestamp(expiry, tz=datetime.UTC),
    )


def _list(value: object, *, length: int | None = None) -> list[object]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise TypeError("a part of the token has the wrong shape")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("a name in the token is not a string")
    return value
