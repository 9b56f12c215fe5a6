"""The record the upload API writes next to a complete payload (`uploads/.../upload.json`).

Written last, after the payload: its presence means the upload finished and these numbers are
what was received. The controller derives the artifact digest from `sha256`; the publisher
unpacks by `format`.
"""

from __future__ import annotations

import dataclasses
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
