"""Upload tokens: what the controller issues the upload API accepts until it expires, for exactly
that object; anything altered, forged, expired or malformed is an UploadTokenRejected."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.publication.upload_token import UploadGrant, UploadTokenRejected, issue, verify
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelKind

BOUNDED = settings(max_examples=200, deadline=None)
KEY = b"k" * 32
OTHER_KEY = b"x" * 32
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
EXPIRES = NOW + datetime.timedelta(hours=2)
OWNER = Owner(
    kind=ModelKind.MODEL, namespace="team-a", name="llama", uid="6f1c1c4e-8d6a-4d3c-9f55-1b0c0c1e2a3b"
)
CLUSTER_OWNER = Owner(kind=ModelKind.CLUSTER_MODEL, namespace="", name="llama", uid="uid-2")


def token(owner: Owner = OWNER, expires_at: datetime.datetime = EXPIRES, key: bytes = KEY) -> str:
    return issue(owner, expires_at=expires_at, key=key)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def payload_of(value: str) -> dict[str, Any]:
    encoded = value.partition(".")[0]
    document: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return document


def with_payload(value: str, document: dict[str, Any]) -> str:
    return (
        b64(json.dumps(document, separators=(",", ":"), sort_keys=True).encode())
        + "."
        + value.partition(".")[2]
    )


@pytest.mark.parametrize("owner", [OWNER, CLUSTER_OWNER])
def test_an_issued_token_verifies_to_its_owner_and_expiry(owner: Owner) -> None:
    grant = verify(token(owner), key=KEY, now=NOW)
    assert grant == UploadGrant(owner=owner, expires_at=EXPIRES)
    assert grant.expires_at.tzinfo is not None


def test_a_token_is_url_safe_and_has_two_parts() -> None:
    value = token()
    payload, separator, signature = value.partition(".")
    assert separator == "."
    assert payload
    assert signature
    assert "." not in signature
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_the_payload_names_the_object_and_the_expiry_and_never_the_key() -> None:
    document = payload_of(token())
    nonce = document.pop("i")
    assert document == {
        "k": "Model",
        "n": "team-a",
        "m": "llama",
        "u": OWNER.uid,
        "e": int(EXPIRES.timestamp()),
    }
    assert isinstance(nonce, str)
    assert len(nonce) >= 16
    assert KEY.decode() not in token()


def test_two_tokens_for_one_object_and_expiry_differ() -> None:
    # A URL issued again in the same second must still replace the old one (see the upload API).
    assert token() != token()
    assert verify(token(), key=KEY, now=NOW) == verify(token(), key=KEY, now=NOW)


def test_the_expiry_is_exclusive() -> None:
    value = token()
    assert verify(value, key=KEY, now=EXPIRES - datetime.timedelta(microseconds=1)).owner == OWNER
    with pytest.raises(UploadTokenRejected, match="expired at 2026-01-02T05:04:05"):
        verify(value, key=KEY, now=EXPIRES)
    with pytest.raises(UploadTokenRejected, match="expired"):
        verify(value, key=KEY, now=EXPIRES + datetime.timedelta(days=365))


def test_fractions_of_a_second_never_extend_a_token() -> None:
    value = token(expires_at=EXPIRES + datetime.timedelta(milliseconds=999))
    with pytest.raises(UploadTokenRejected, match="expired"):
        verify(value, key=KEY, now=EXPIRES)


def test_an_expiry_in_another_time_zone_is_the_same_instant() -> None:
    moscow = datetime.timezone(datetime.timedelta(hours=3))
    value = token(expires_at=EXPIRES.astimezone(moscow))
    assert verify(value, key=KEY, now=NOW).expires_at == EXPIRES


def test_a_token_issued_already_expired_is_refused() -> None:
    with pytest.raises(UploadTokenRejected, match="expired"):
        verify(token(expires_at=NOW - datetime.timedelta(seconds=1)), key=KEY, now=NOW)


def test_a_token_for_another_object_never_verifies_as_this_one() -> None:
    recreated = Owner(kind=OWNER.kind, namespace=OWNER.namespace, name=OWNER.name, uid="another-uid")
    assert verify(token(recreated), key=KEY, now=NOW).owner != OWNER
    assert token(recreated) != token()


@pytest.mark.parametrize(
    "field",
    [
        {"k": "ClusterModel"},
        {"n": "team-b"},
        {"m": "llama-2"},
        {"u": "another-uid"},
        {"e": int(EXPIRES.timestamp()) + 3600},
    ],
)
def test_a_tampered_payload_is_refused(field: dict[str, Any]) -> None:
    value = token()
    with pytest.raises(UploadTokenRejected, match="not valid"):
        verify(with_payload(value, payload_of(value) | field), key=KEY, now=NOW)


def test_a_payload_with_padding_or_another_encoding_is_refused() -> None:
    value = token()
    payload, _, signature = value.partition(".")
    for altered in (payload + "=", payload + "==", " " + payload, payload.upper()):
        with pytest.raises(UploadTokenRejected):
            verify(f"{altered}.{signature}", key=KEY, now=NOW)


def test_a_tampered_signature_is_refused() -> None:
    value = token()
    payload, _, signature = value.partition(".")
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    for altered in (
        flipped,
        signature[:-1],
        signature + "A",
        signature + "=",
        signature[::-1],
        signature.upper(),
    ):
        with pytest.raises(UploadTokenRejected, match="not valid"):
            verify(f"{payload}.{altered}", key=KEY, now=NOW)


def test_a_token_signed_with_another_key_is_refused() -> None:
    with pytest.raises(UploadTokenRejected, match="not valid"):
        verify(token(key=OTHER_KEY), key=KEY, now=NOW)
    with pytest.raises(UploadTokenRejected, match="not valid"):
        verify(token(), key=OTHER_KEY, now=NOW)
    with pytest.raises(UploadTokenRejected, match="not valid"):
        verify(token(), key=KEY[:-1], now=NOW)


def test_an_empty_key_neither_issues_nor_verifies() -> None:
    with pytest.raises(ValueError, match="empty"):
        issue(OWNER, expires_at=EXPIRES, key=b"")
    with pytest.raises(UploadTokenRejected):
        verify(token(), key=b"", now=NOW)


def forged(document: Any, key: bytes = KEY) -> str:
    """A token correctly signed over an arbitrary payload: what a leaked key could produce."""
    payload = b64(json.dumps(document).encode()) if not isinstance(document, bytes) else b64(document)
    return f"{payload}.{b64(hmac.new(key, payload.encode(), hashlib.sha256).digest())}"


@pytest.mark.parametrize(
    "value",
    [
        "",
        ".",
        "abc",
        "abc.",
        ".abc",
        "no-dot-at-all",
        "Zm9v.YmFy.YmF6",
        "Zm9v.ÿ",  # non-ASCII signature
        "Zm9v.подпись",
        "ÿÿÿ.abc",
        "a\x00b.c",
        forged(b"\xff\xfe"),
        forged(b"not json"),
        forged([1, 2]),
        forged("string"),
        forged(None),
        forged({}),
        forged({"k": "Model", "n": "a", "m": "b", "u": "c"}),
        forged({"k": "Model", "n": "a", "m": "b", "u": "c", "e": "soon"}),
        forged({"k": "Model", "n": "a", "m": "b", "u": "c", "e": None}),
        forged({"k": "Model", "n": "a", "m": "b", "u": "c", "e": [1]}),
    ],
)
def test_malformed_tokens_are_refused(value: str) -> None:
    with pytest.raises(UploadTokenRejected):
        verify(value, key=KEY, now=NOW)


@pytest.mark.parametrize(
    "expiry",
    ["1e400", "-1e400", "1e300", "NaN", "Infinity", str(10**400), str(2**63), str(-(10**20)), "1.5"],
)
def test_an_expiry_out_of_the_calendar_is_a_malformed_token(expiry: str) -> None:
    # Genuinely signed (a leaked key, or a bug in the issuer): still a rejection, never an
    # OverflowError or OSError escaping to the caller.
    document = f'{{"e":{expiry},"k":"Model","m":"b","n":"a","u":"c"}}'.encode()
    with pytest.raises(UploadTokenRejected, match="malformed"):
        verify(forged(document), key=KEY, now=NOW)


def test_a_deeply_nested_signed_payload_is_a_malformed_token() -> None:
    with pytest.raises(UploadTokenRejected, match="malformed"):
        verify(forged(b"[" * 100_000 + b"]" * 100_000), key=KEY, now=NOW)


@pytest.mark.parametrize("value", ["\ud800.abc", "abc.\udfff", "\udc80\udc80.\udc80"])
def test_a_token_with_lone_surrogates_is_refused(value: str) -> None:
    with pytest.raises(UploadTokenRejected, match="malformed"):
        verify(value, key=KEY, now=NOW)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("eknmui"), inner, max_size=6),
    max_leaves=20,
)


@given(document=st.dictionaries(st.sampled_from("eknmui"), JSON_VALUES, max_size=6) | JSON_VALUES)
@BOUNDED
def test_any_signed_document_is_granted_or_rejected_cleanly(document: Any) -> None:
    try:
        grant = verify(forged(document), key=KEY, now=NOW)
    except UploadTokenRejected:
        return
    assert grant.expires_at > NOW


@given(payload=st.binary(max_size=200))
@BOUNDED
def test_any_signed_bytes_are_granted_or_rejected_cleanly(payload: bytes) -> None:
    with contextlib.suppress(UploadTokenRejected):
        verify(forged(payload), key=KEY, now=NOW)


@given(value=st.text(alphabet=st.characters(codec=None, categories=None), max_size=80))
@BOUNDED
def test_any_string_with_any_code_point_is_rejected_cleanly(value: str) -> None:
    with pytest.raises(UploadTokenRejected):
        verify(value, key=KEY, now=NOW)


def test_a_rejection_never_shows_the_key() -> None:
    secret = b"very-secret-signing-key"
    for value in ("", "abc.def", token(key=OTHER_KEY), token(key=secret, expires_at=NOW)):
        with pytest.raises(UploadTokenRejected) as rejected:
            verify(value, key=secret, now=NOW)
        assert secret.decode() not in str(rejected.value)


@given(value=st.text(max_size=80))
@BOUNDED
def test_any_string_is_rejected_cleanly(value: str) -> None:
    with pytest.raises(UploadTokenRejected):
        verify(value, key=KEY, now=NOW)


@given(position=st.integers(min_value=0), replacement=st.characters(codec="ascii"))
@BOUNDED
def test_changing_any_character_is_detected(position: int, replacement: str) -> None:
    value = token()
    index = position % len(value)
    altered = value[:index] + replacement + value[index + 1 :]
    if altered == value:
        return
    try:
        grant = verify(altered, key=KEY, now=NOW)
    except UploadTokenRejected:
        return
    # Base64 ignores the unused low bits of the last character; whatever decodes must be identical.
    assert grant == verify(value, key=KEY, now=NOW)
