"""Delivery tokens (`domain.delivery.token`), pure: what a genuine token grants, and that anything
else (forged, expired, malformed, hostile) ends in `DeliveryTokenRejected`, never another error."""

from __future__ import annotations

import base64
import datetime
import json

import pytest

from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.token import (
    PREFIX,
    DeliveryGrant,
    DeliveryTokenRejected,
    GrantedArtifact,
    is_delivery_token,
    issue,
    verify,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.publication.upload_token import seal
from ai_models.names import ModelKind

KEY = b"k" * 32
NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)
WORKLOAD = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", "u-1")
LLAMA = ModelKey(ModelKind.MODEL, "team-a", "llama")
QWEN = ModelKey(ModelKind.CLUSTER_MODEL, "", "qwen")
FOREIGN = ModelKey(ModelKind.MODEL, "team-b", "llama")
D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


def grant(
    *artifacts: tuple[ModelKey, str], expires_in: datetime.timedelta = datetime.timedelta(hours=1)
) -> DeliveryGrant:
    return DeliveryGrant(
        workload=WORKLOAD,
        artifacts=tuple(GrantedArtifact(ref=ref, digest=digest) for ref, digest in artifacts),
        expires_at=NOW + expires_in,
    )


def test_a_genuine_token_grants_its_listed_artifacts_and_nothing_else() -> None:
    token = issue(grant((LLAMA, D1), (QWEN, D2), (FOREIGN, D3)), key=KEY)
    verified = verify(token, key=KEY, now=NOW)
    assert is_delivery_token(token)
    assert verified.workload == WORKLOAD
    assert verified.digest_of(LLAMA) == D1
    assert verified.digest_of(QWEN) == D2
    assert verified.digest_of(ModelKey(ModelKind.MODEL, "team-a", "other")) is None
    # A Model of another namespace is never granted, whatever the issuer listed.
    assert verified.digest_of(FOREIGN) is None


def test_every_token_is_unique() -> None:
    assert issue(grant((LLAMA, D1)), key=KEY) != issue(grant((LLAMA, D1)), key=KEY)


def _forge(document: object) -> str:
    return PREFIX + seal(document, key=KEY)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "token", "expired"),
    [
        ("another key", issue(grant((LLAMA, D1)), key=b"x" * 32), False),
        ("no prefix", issue(grant((LLAMA, D1)), key=KEY).removeprefix(PREFIX), False),
        ("empty", "", False),
        ("prefix only", PREFIX, False),
        ("non-ASCII", PREFIX + "é.é", False),
        ("expired", issue(grant((LLAMA, D1), expires_in=datetime.timedelta(0)), key=KEY), True),
        ("not an object", _forge(["w"]), False),
        ("bad workload", _forge({"w": ["Deployment"], "a": [], "e": 2**31, "i": "n"}), False),
        ("not a workload kind", _forge({"w": ["Pod", "n", "w", "u"], "a": [], "e": 2**31}), False),
        (
            "bad digest",
            _forge({"w": ["Deployment", "n", "w", "u"], "a": [["Model", "n", "m", "md5:1"]], "e": 2**31}),
            False,
        ),
        (
            "bad kind",
            _forge({"w": ["Deployment", "n", "w", "u"], "a": [["Pod", "n", "m", D1]], "e": 2**31}),
            False,
        ),
        ("float expiry", _forge({"w": ["Deployment", "n", "w", "u"], "a": [], "e": 1.5}), False),
        ("bool expiry", _forge({"w": ["Deployment", "n", "w", "u"], "a": [], "e": True}), False),
        ("huge expiry", _forge({"w": ["Deployment", "n", "w", "u"], "a": [], "e": 10**30}), False),
        (
            "too many",
            _forge({"w": ["Deployment", "n", "w", "u"], "a": [["Model", "n", "m", D1]] * 65, "e": 2**31}),
            False,
        ),
    ],
)
def test_anything_but_a_genuine_unexpired_token_is_rejected(case: str, token: str, expired: bool) -> None:
    with pytest.raises(DeliveryTokenRejected) as rejected:
        verify(token, key=KEY, now=NOW)
    assert rejected.value.expired is expired, case
    assert KEY.decode() not in str(rejected.value)


def test_a_payload_changed_after_signing_is_rejected_as_not_genuine() -> None:
    token = issue(grant((LLAMA, D1)), key=KEY)
    payload, signature = token.removeprefix(PREFIX).split(".")
    document = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    document["a"].append(["Model", "team-a", "secret-model", D2])
    widened = base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")
    with pytest.raises(DeliveryTokenRejected, match="not genuine"):
        verify(f"{PREFIX}{widened}.{signature}", key=KEY, now=NOW)


def test_the_documents_the_rejections_alter_are_accepted_unaltered() -> None:
    """The shape each rejected case above changes one part of: so each case fails on that part."""
    verified = verify(
        _forge({"w": ["Deployment", "n", "w", "u"], "a": [["Model", "n", "m", D1]], "e": 2**31}),
        key=KEY,
        now=NOW,
    )
    assert verified.workload == Workload(WorkloadKind.DEPLOYMENT, "n", "w", "u")
    assert verified.digest_of(ModelKey(ModelKind.MODEL, "n", "m")) == D1
