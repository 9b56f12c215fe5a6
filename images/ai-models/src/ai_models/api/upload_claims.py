"""One upload per object across every api replica: a claim created in the object store.

Before an upload's body is accepted, the replica creates `claim.json` under the object's upload
prefix with the store's create-if-absent write; of two replicas racing for one object exactly one
creates it, and the other answers 409 without reading a byte of its body. The holder removes the
claim when the upload ends, however it ends.

A replica that dies mid-upload leaves its claim behind. Every claim carries `expiresAt`, the
moment its holder had certainly stopped: the upload's own deadline (see `upload_pace`) plus a
margin. A stale claim is taken over by whoever first creates the takeover marker
`takeover-<claim id>` (create-if-absent again), so two replicas that both find the same stale
claim never both replace it (D42).
"""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import Callable
from typing import Final, TypeVar

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.api.models import ProblemType
from ai_models.api.problems import ApiProblem, object_store_error
from ai_models.api.upload_ledger import describe_owner
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

# How long after its holder's deadline a claim still stands: the holder's last store calls
# (deleting what it wrote) and clock differences between replicas.
CLAIM_MARGIN_SECONDS: Final = 120.0
_ATTEMPTS: Final = 3


def _timestamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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
            return UploadClaim(claim_id="unreadable", replica="unknown", claimed_at=epoch, expires_at=epoch)

    def _call(self, owner: Owner, call: Callable[[], T]) -> T:
        try:
            return call()
        except ObjectNotFound:
            raise
        except ObjectStoreError as error:
            # The store's own words name its bucket or directory: logged, never answered.
            log.error("cannot claim an upload", extra={"owner": describe_owner(owner), "error": str(error)})
            raise object_store_error(
                f"{describe_owner(owner)}: the object store failed while claiming the upload (the api "
                "replica logged the cause); nothing was stored, upload again"
            ) from error
