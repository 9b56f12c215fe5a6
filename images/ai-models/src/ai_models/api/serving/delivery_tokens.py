"""The serving API's second credential: delivery tokens of materialize Jobs (D86).

A bearer token with the delivery prefix (`domain.delivery.token.PREFIX`) is never sent to a
TokenReview: it is checked here against the delivery signing key (`data.key` of the Secret
`ai-models-delivery-signing`, read and cached by `SigningKeys`, read again at once when a token
does not verify). It admits GETs (and HEADs) of the manifest and files of exactly the artifacts it
lists; the serving answer then also requires the object's current digest to be the listed one
(`ServingRequest.granted_digest`). Everything else is a problem: 401 for a token that is not
genuine or has expired, 403 for an object it does not list.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable

from ai_models.api.problems import ApiProblem, forbidden, unauthenticated
from ai_models.api.signing_keys import SigningKeys
from ai_models.domain.delivery.token import DeliveryGrant, DeliveryTokenRejected, verify
from ai_models.domain.models.reference import ModelKey
from ai_models.names import DELIVERY_SIGNING_KEY

# Download slots are counted per workload for delivery tokens; Kubernetes user names never start so.
SUBJECT_PREFIX = "delivery:"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True)
class DeliveryAdmission:
    grant: DeliveryGrant
    digest: str  # what the token grants for the requested object

    @property
    def subject(self) -> str:
        workload = self.grant.workload
        return f"{SUBJECT_PREFIX}{workload.kind}/{workload.namespace}/{workload.name}"


class DeliveryTokens:
    def __init__(self, *, keys: SigningKeys, clock: Callable[[], datetime.datetime] = _now) -> None:
        self._keys = keys
        self._clock = clock

    def admit(self, token: str, ref: ModelKey) -> DeliveryAdmission:
        """The grant, when the token is genuine, unexpired and lists `ref`; raises ApiProblem 401,
        403 (or 502/503 when the key cannot be read)."""
        grant = self._verified(token)
        digest = grant.digest_of(ref)
        if digest is None:
            granted = ", ".join(item.ref.describe() for item in grant.artifacts) or "nothing"
            raise forbidden(
                f"the delivery token of {grant.workload.describe()} does not grant {ref.describe()} (it "
                f"grants {granted}); a workload reads the Models of its own namespace and ClusterModels "
                "it names in its annotations"
            )
        return DeliveryAdmission(grant=grant, digest=digest)

    def _verified(self, token: str) -> DeliveryGrant:
        key = self._keys.current()
        try:
            return self._verify(token, key)
        except DeliveryTokenRejected as rejected:
            # A token that does not verify may be signed with a key rotated since it was read.
            fresh = None if rejected.expired else self._keys.refreshed()
            if rejected.expired or fresh == key:
                raise unauthenticated(str(rejected)) from None
        try:
            return self._verify(token, fresh)
        except DeliveryTokenRejected as rejected:
            raise unauthenticated(str(rejected)) from None

    def _verify(self, token: str, key: bytes | None) -> DeliveryGrant:
        if key is None:
            raise DeliveryTokenRejected(
                f"no delivery token is valid now: the delivery signing key ({self._keys.where}, key "
                f"{DELIVERY_SIGNING_KEY!r}) does not exist; the controller creates it and issues new "
                "tokens to new materialize Jobs"
            )
        return verify(token, key=key, now=self._clock())


def digest_changed(ref: ModelKey, *, current: str, granted: str, holder: str) -> ApiProblem:
    """403 for a listed object whose artifact is no longer the one the token was issued for."""
    return forbidden(
        f"{ref.describe()} now has artifact {current}, the delivery token of {holder} grants {granted}: "
        "the object was published again; the controller materializes the new artifact with a new token"
    )
