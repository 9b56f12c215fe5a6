"""One upload per object across every api replica: a claim created in the object store.

Before an upload's body is accepted, the replica creates `claim.json` under the object's upload
prefix with the store's create-if-absent write; of two replicas racing for one object exactly one
creates it, and the other answers 409 without reading a byte of its body. The holder removes the
claim when the upload ends, however it ends.

A claim is a lease: it carries `expiresAt`, a short while ahead, and its holder renews it while
the upload runs. A replica that dies mid-upload stops renewing, so its claim lapses within one
lease, whatever the upload's size. A holder gives up an upload whose claim it could not keep
(renewed too late, or found replaced): it never records a body another replica may be receiving.
A stale claim is taken over by whoever first creates the takeover marker `takeover-<claim id>`
(create-if-absent again), so two replicas that both find the same stale claim never both
replace it (D42).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import hashlib
import logging
import secrets
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem, store_failed
from ai_models.api.upload.ledger import describe_owner
from ai_models.domain.artifacts.layout import upload_claim_key, upload_takeover_key
from ai_models.domain.artifacts.upload_record import (
    UploadClaim,
    UploadRecordError,
    claim_from_json,
    claim_to_json,
)
from ai_models.domain.storage.ledger import Owner

log = logging.getLogger(__name__)
T = TypeVar("T")

# A claim stands this long past its holder's last renewal; the holder renews it every
# CLAIM_RENEW_SECONDS, so a few store calls may fail in a row before it lapses.
CLAIM_LEASE_SECONDS: Final = 120.0
CLAIM_RENEW_SECONDS: Final = 30.0
# A holder renews only while this much of its lease is left: a replica taking over a lapsed claim
# and a late renewal can then not overlap unless the replicas' clocks differ by more than this.
RENEW_SAFETY_SECONDS: Final = 15.0
_ATTEMPTS: Final = 3


def _timestamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class ClaimLost(Exception):
    """This replica no longer holds the upload's claim; the message names the object."""


def _conflict(owner: Owner, detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.UPLOAD_CONFLICT, 409, f"{describe_owner(owner)}: {detail}")


class UploadClaims:
    def __init__(self, *, store: ObjectStore, replica: str, clock: Callable[[], datetime.datetime]) -> None:
        self._store = store
        self._replica = replica
        self._clock = clock

    def take(self, owner: Owner, *, lifetime_seconds: float) -> UploadClaim:
        """This replica's claim on `owner`'s upload; raises ApiProblem 409 when another one holds it."""
        now = self._clock()
        claim = UploadClaim(
            claim_id=secrets.token_hex(16),
            replica=self._replica,
            claimed_at=now,
            expires_at=now + datetime.timedelta(seconds=lifetime_seconds),
        )
        document = claim_to_json(claim)
        key = upload_claim_key(owner)
        for _attempt in range(_ATTEMPTS):
            if self._call(owner, lambda: self._store.put_bytes_if_absent(key, document)) is not None:
                return self._confirmed(owner, claim)
            held = self._read(owner)
            if held is None:
                continue  # released meanwhile: try again
            if held.claim_id == claim.claim_id:
                return claim  # our own write, retried by the client after a lost answer
            if not held.expired(self._clock()):
                raise _conflict(
                    owner,
                    f"another upload for it is in progress (on api replica {held.replica} since "
                    f"{_timestamp(held.claimed_at)}); wait for it to finish or fail. If that replica "
                    f"stopped, its claim lapses at {_timestamp(held.expires_at)} (deleting and creating the "
                    "object again starts afresh at once)",
                )
            self._take_over(owner, held, document)
            if self._call(owner, lambda: self._store.put_bytes_if_absent(key, document)) is not None:
                return self._confirmed(owner, claim)
        raise _conflict(
            owner, "another upload for it started at the same moment; wait for it to finish or fail"
        )

    def renew(self, owner: Owner, claim: UploadClaim, *, lease_seconds: float) -> UploadClaim:
        """`claim` extended to `lease_seconds` from now; ClaimLost when it is no longer this holder's."""
        held = self._read(owner)
        if held is None or held.claim_id != claim.claim_id:
            raise ClaimLost(f"{describe_owner(owner)}: the upload's claim was removed or taken over")
        now = self._clock()
        if now >= held.expires_at - datetime.timedelta(seconds=RENEW_SAFETY_SECONDS):
            raise ClaimLost(
                f"{describe_owner(owner)}: the upload's claim could not be renewed before it lapsed at "
                f"{_timestamp(held.expires_at)}"
            )
        renewed = dataclasses.replace(claim, expires_at=now + datetime.timedelta(seconds=lease_seconds))
        self._call(owner, lambda: self._store.put_bytes(upload_claim_key(owner), claim_to_json(renewed)))
        return renewed

    def _confirmed(self, owner: Owner, claim: UploadClaim) -> UploadClaim:
        """Read the claim back: an S3-compatible store that ignores `If-None-Match` lets a second
        writer replace it, and the first one must then step back instead of both proceeding."""
        held = self._read(owner)
        if held is None or held.claim_id != claim.claim_id:
            log.error(
                "an upload claim was replaced right after it was created: the object store seems to "
                "ignore If-None-Match on PutObject, so uploads are not exclusive across replicas",
                extra={"owner": describe_owner(owner)},
            )
            raise _conflict(
                owner, "another upload for it started at the same moment; wait for it to finish or fail"
            )
        return claim

    def release(self, owner: Owner, claim: UploadClaim) -> None:
        """Remove `claim` if it still stands; a failure is logged (the claim then lapses on its own)."""
        try:
            held = self._read(owner)
            if held is not None and held.claim_id == claim.claim_id:
                self._store.delete(upload_claim_key(owner))
        except (ApiProblem, ObjectStoreError) as error:
            log.error(
                "cannot remove an upload claim; it lapses at its expiry",
                extra={
                    "owner": describe_owner(owner),
                    "expiresAt": _timestamp(claim.expires_at),
                    "error": getattr(error, "detail", str(error)),
                },
            )

    def _take_over(self, owner: Owner, stale: UploadClaim, document: bytes) -> None:
        marker = upload_takeover_key(owner, stale.claim_id)
        if self._call(owner, lambda: self._store.put_bytes_if_absent(marker, document)) is None:
            raise _conflict(
                owner,
                f"the claim of a stopped upload (api replica {stale.replica}) is being taken over by "
                "another upload right now; wait for that one to finish or fail",
            )
        # Still the stale claim (not one created since by a fresh upload): only then remove it.
        current = self._read(owner)
        if current is not None and current.claim_id != stale.claim_id:
            raise _conflict(
                owner, "another upload for it started at the same moment; wait for it to finish or fail"
            )
        log.warning(
            "taking over the lapsed claim of an upload whose replica stopped",
            extra={"owner": describe_owner(owner), "replica": stale.replica, "claimId": stale.claim_id},
        )
        self._call(owner, lambda: self._store.delete(upload_claim_key(owner)))

    def _read(self, owner: Owner) -> UploadClaim | None:
        key = upload_claim_key(owner)
        try:
            data = self._call(owner, lambda: self._store.get_bytes(key))
        except ObjectNotFound:
            return None
        try:
            return claim_from_json(data)
        except UploadRecordError:
            # Claims are written whole (atomic writes); an unreadable one was not written by an api
            # replica of this version: treat it as lapsed, so it can never block the object forever.
            epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
            # Named by its bytes: each unreadable claim gets its own takeover marker, so one taken
            # over before never blocks the takeover of the next.
            claim_id = f"unreadable-{hashlib.sha256(data).hexdigest()[:16]}"
            return UploadClaim(claim_id=claim_id, replica="unknown", claimed_at=epoch, expires_at=epoch)

    def _call(self, owner: Owner, call: Callable[[], T]) -> T:
        try:
            return call()
        except ObjectNotFound:
            raise
        except ObjectStoreError as error:
            raise store_failed(
                error,
                f"{describe_owner(owner)}: the object store failed while claiming the upload (the api "
                "replica logged the cause); nothing was stored, upload again",
                owner=describe_owner(owner),
            ) from error


class ClaimKeeper:
    """Renews an upload's claim while `run` awaits its body, and stops the body when it is lost.

    A lost claim may belong to another replica by now: the upload is then answered 409 and what it
    reserved or wrote is left alone (the new holder owns the payload key and the reservation).
    """

    def __init__(
        self,
        claims: UploadClaims,
        owner: Owner,
        claim: UploadClaim,
        *,
        renew_seconds: float = CLAIM_RENEW_SECONDS,
        lease_seconds: float = CLAIM_LEASE_SECONDS,
    ) -> None:
        self._claims = claims
        self._owner = owner
        self._renew_seconds = renew_seconds
        self._lease_seconds = lease_seconds
        self.claim = claim
        self.lost: str | None = None

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(work)
        keeper = asyncio.ensure_future(self._keep(task))
        try:
            return await task
        except asyncio.CancelledError:
            if self.lost is None:
                raise
            raise _conflict(
                self._owner,
                f"{self.lost}, so this replica stopped receiving the upload (another one may be receiving "
                "it now); nothing of this attempt was recorded, upload again once that one ended",
            ) from None
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def _keep(self, task: asyncio.Future[Any]) -> None:
        while True:
            await asyncio.sleep(self._renew_seconds)
            try:
                self.claim = await asyncio.to_thread(
                    self._claims.renew, self._owner, self.claim, lease_seconds=self._lease_seconds
                )
            except ClaimLost as lost:
                log.error("an upload lost its claim", extra={"owner": describe_owner(self._owner)})
                self.lost = str(lost)
                task.cancel()
                return
            except ApiProblem:
                # The store failed (logged by _call); the next renewal tries again, and the claim
                # lapses only if renewals keep failing for a whole lease.
                continue
