"""The records the upload API writes next to a payload: `upload.json` and `claim.json`.

`upload.json` is written last, after the payload: its presence means the upload finished and these
numbers are what was received. The controller derives the artifact digest from `sha256`; the
publisher unpacks by `format`.

`claim.json` is created (create-if-absent) before the body is accepted and removed when the upload
ends: of two replicas receiving an upload for one object, only the one that created it proceeds.
A claim past `expiresAt` belongs to a replica that died mid-upload; it may be taken over (D42).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

from ai_models.domain.artifacts.sniff import PayloadFormat


class UploadRecordError(ValueError):
    """The record is unreadable; the upload counts as not received."""


@dataclasses.dataclass(frozen=True)
class UploadRecord:
    sha256: str  # hex of the payload
    size_bytes: int
    format: PayloadFormat
    filename: str  # safe name for single-file payloads (see sniff.safe_filename)
    received_at: str  # RFC 3339


def record_to_json(record: UploadRecord) -> bytes:
    return json.dumps(
        {
            "sha256": record.sha256,
            "sizeBytes": record.size_bytes,
            "format": record.format.value,
            "filename": record.filename,
            "receivedAt": record.received_at,
        },
        sort_keys=True,
    ).encode()


def record_from_json(data: bytes) -> UploadRecord:
    try:
        document: dict[str, Any] = json.loads(data)
        return UploadRecord(
            sha256=str(document["sha256"]),
            size_bytes=int(document["sizeBytes"]),
            format=PayloadFormat(document["format"]),
            filename=str(document["filename"]),
            received_at=str(document["receivedAt"]),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise UploadRecordError(f"unreadable upload record: {error}") from error


@dataclasses.dataclass(frozen=True)
class UploadClaim:
    claim_id: str  # random, names this claim (and its takeover marker)
    replica: str  # the pod that holds it, for messages and logs
    claimed_at: datetime.datetime
    expires_at: datetime.datetime  # after this, the holder has certainly stopped (its deadline passed)

    def expired(self, now: datetime.datetime) -> bool:
        return now >= self.expires_at


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def claim_to_json(claim: UploadClaim) -> bytes:
    return json.dumps(
        {
            "claimId": claim.claim_id,
            "replica": claim.replica,
            "claimedAt": _rfc3339(claim.claimed_at),
            "expiresAt": _rfc3339(claim.expires_at),
        },
        sort_keys=True,
    ).encode()


def claim_from_json(data: bytes) -> UploadClaim:
    try:
        document: dict[str, Any] = json.loads(data)
        claimed_at = datetime.datetime.fromisoformat(str(document["claimedAt"]))
        expires_at = datetime.datetime.fromisoformat(str(document["expiresAt"]))
        if claimed_at.tzinfo is None or expires_at.tzinfo is None:
            raise ValueError("claim times carry no time zone")
        return UploadClaim(
            claim_id=str(document["claimId"]),
            replica=str(document["replica"]),
            claimed_at=claimed_at,
            expires_at=expires_at,
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise UploadRecordError(f"unreadable upload claim: {error}") from error
