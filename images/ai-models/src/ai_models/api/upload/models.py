"""The upload API's shapes (contract: `openapi/upload.yaml`), checked against it by the tests."""

from __future__ import annotations

import datetime
from typing import Final

from pydantic import Field

from ai_models.api.models import Shape
from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.names import UPLOAD_API_PREFIX, UPLOADS_PATH

UPLOAD_PREFIX: Final = UPLOAD_API_PREFIX
UPLOAD_PATH: Final = f"{UPLOADS_PATH}{{token}}"
UPLOAD_CONTRACT_PATH: Final = f"{UPLOAD_PREFIX}/openapi.json"
SHA256_HEX_PATTERN: Final = r"^[0-9a-f]{64}$"


class UploadReceipt(Shape):
    size_bytes: int = Field(alias="sizeBytes", ge=0)
    sha256: str = Field(pattern=SHA256_HEX_PATTERN)
    format: PayloadFormat
    received_at: datetime.datetime = Field(alias="receivedAt")
    filename: str
    # Present only when `filename` is not the name the uploader gave: says why.
    filename_note: str | None = Field(default=None, alias="filenameNote")
