"""Upload claims on a real directory store: one holder per object, lapsed claims taken over once,
and a store that ignores create-if-absent detected when it replaces a claim just created."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.problems import ApiProblem
from ai_models.api.upload.claims import RENEW_SAFETY_SECONDS, ClaimKeeper, ClaimLost, UploadClaims
from ai_models.domain.artifacts.layout import upload_claim_key
from ai_models.domain.artifacts.upload_record import UploadClaim, claim_from_json, claim_to_json
from ai_models.domain.storage.ledger import Owner

OWNER = Owner(kind="Model", namespace="team-a", name="llama", uid="uid-1")
NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


def claims(store: Any, replica: str, *, at: datetime.datetime = NOW) -> UploadClaims:
    return UploadClaims(store=store, replica=replica, clock=lambda: at)


@pytest.fixture
def store(tmp_path: Path) -> DirectoryStore:
    return DirectoryStore(tmp_path / "store")


def test_one_replica_holds_the_claim_until_it_releases_it(store: DirectoryStore) -> None:
    first = claims(store, "api-0").take(OWNER, lifetime_seconds=60)
    with pytest.raises(
        ApiProblem, match="in progress \\(on api replica api-0 since 2026-03-01T12:00:00Z\\)"
    ) as refused:
        claims(store, "api-1").take(OWNER, lifetime_seconds=60)
    assert refused.value.status == 409
    stranger = UploadClaim(claim_id="someone-else", replica="api-1", claimed_at=NOW, expires_at=NOW)
    claims(store, "api-1").release(OWNER, stranger)
    assert store.head(upload_claim_key(OWNER)) is not None  # only the holder's own claim is removed
    claims(store, "api-0").release(OWNER, first)
    assert store.head(upload_claim_key(OWNER)) is None
    assert claims(store, "api-1").take(OWNER, lifetime_seconds=60).replica == "api-1"


def test_a_lapsed_claim_is_taken_over_by_exactly_one_replica(store: DirectoryStore) -> None:
    claims(store, "api-dead").take(OWNER, lifetime_seconds=60)
    later = NOW + datetime.timedelta(seconds=61)
    winner = claims(store, "api-1", at=later).take(OWNER, lifetime_seconds=60)
    assert winner.replica == "api-1"
    # The winner's claim is live: nobody else takes it over, whatever they found before.
    with pytest.raises(ApiProblem, match="in progress"):
        claims(store, "api-2", at=later).take(OWNER, lifetime_seconds=60)


class LaxStore:
    """A store whose create-if-absent replaces (an S3 service ignoring If-None-Match), with another
    replica's write landing right after this one's."""

    def __init__(self, inner: DirectoryStore, *, interloper: bytes) -> None:
        self.inner = inner
        self.interloper = interloper

    def put_bytes_if_absent(self, key: str, data: bytes) -> Any:
        info = self.inner.put_bytes(key, data)
        self.inner.put_bytes(key, self.interloper)
        return info

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_claim_replaced_right_after_it_was_created_is_given_up(store: DirectoryStore) -> None:
    other = claims(store, "api-1").take(OWNER, lifetime_seconds=60)
    interloper = store.get_bytes(upload_claim_key(OWNER))
    claims(store, "api-1").release(OWNER, other)
    with pytest.raises(ApiProblem, match="started at the same moment"):
        claims(LaxStore(store, interloper=interloper), "api-0").take(OWNER, lifetime_seconds=60)


def test_a_holder_renews_its_claim_only_while_it_still_stands(store: DirectoryStore) -> None:
    held = claims(store, "api-0").take(OWNER, lifetime_seconds=60)
    renewed = claims(store, "api-0", at=NOW + datetime.timedelta(seconds=30)).renew(
        OWNER, held, lease_seconds=60
    )
    assert renewed.expires_at == NOW + datetime.timedelta(seconds=90)
    assert claim_from_json(store.get_bytes(upload_claim_key(OWNER))) == renewed
    # Too close to its end: another replica may be taking it over already.
    late = NOW + datetime.timedelta(seconds=90 - RENEW_SAFETY_SECONDS)
    with pytest.raises(ClaimLost, match="could not be renewed before it lapsed"):
        claims(store, "api-0", at=late).renew(OWNER, renewed, lease_seconds=60)
    stranger = UploadClaim(claim_id="someone-else", replica="api-1", claimed_at=NOW, expires_at=NOW)
    with pytest.raises(ClaimLost, match="removed or taken over"):
        claims(store, "api-0").renew(OWNER, stranger, lease_seconds=60)


def live_claims(store: Any, replica: str) -> UploadClaims:
    return UploadClaims(store=store, replica=replica, clock=lambda: datetime.datetime.now(datetime.UTC))


def test_the_keeper_extends_the_claim_while_the_upload_runs(store: DirectoryStore) -> None:
    replica = live_claims(store, "api-0")
    # Taken for 20 s, renewed to 60 s from each renewal: a renewal is plain to see.
    keeper = ClaimKeeper(
        replica, OWNER, replica.take(OWNER, lifetime_seconds=20), renew_seconds=0.05, lease_seconds=60
    )
    first = keeper.claim.expires_at

    async def upload() -> str:
        deadline = asyncio.get_running_loop().time() + 10
        while keeper.claim.expires_at <= first:
            assert asyncio.get_running_loop().time() < deadline, "the claim was never renewed"
            await asyncio.sleep(0.02)
        return "received"

    assert asyncio.run(keeper.run(upload())) == "received"
    assert claim_from_json(store.get_bytes(upload_claim_key(OWNER))).expires_at > first
    assert keeper.lost is None


def test_an_upload_whose_claim_was_taken_over_stops_with_a_conflict(store: DirectoryStore) -> None:
    replica = live_claims(store, "api-0")
    keeper = ClaimKeeper(replica, OWNER, replica.take(OWNER, lifetime_seconds=60), renew_seconds=0.05)
    recorded: list[str] = []

    async def upload() -> None:
        # Another replica took the claim over (this one was cut off from the store for too long).
        store.put_bytes(
            upload_claim_key(OWNER),
            claim_to_json(UploadClaim(claim_id="newer", replica="api-1", claimed_at=NOW, expires_at=NOW)),
        )
        await asyncio.sleep(30)
        recorded.append("upload.json")

    with pytest.raises(ApiProblem, match="this replica stopped receiving the upload") as stopped:
        asyncio.run(keeper.run(upload()))
    assert stopped.value.status == 409
    assert recorded == []
    assert keeper.lost is not None
    assert claim_from_json(store.get_bytes(upload_claim_key(OWNER))).claim_id == "newer"


def test_each_unreadable_claim_is_taken_over_on_its_own(store: DirectoryStore) -> None:
    later = NOW + datetime.timedelta(seconds=1)
    for garbage in (b"not json", b"{also not a claim"):
        store.put_bytes(upload_claim_key(OWNER), garbage)
        taken = claims(store, "api-1", at=later).take(OWNER, lifetime_seconds=60)
        assert taken.replica == "api-1"
        claims(store, "api-1", at=later).release(OWNER, taken)
