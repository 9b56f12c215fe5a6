"""The upload record (`uploads/.../upload.json`): written by the upload API, read by the controller
and the publisher; an unreadable one is an UploadRecordError (the upload counts as not received)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.domain.artifacts.upload_record import (
    UploadRecord,
    UploadRecordError,
    record_from_json,
    record_to_json,
)

BOUNDED = settings(max_examples=200, deadline=None)
RECORD = UploadRecord(
    sha256=hashlib.sha256(b"payload").hexdigest(),
    size_bytes=4_920_733_696,
    format=PayloadFormat.GGUF,
    filename="llama-3.1-8b.Q4_K_M.gguf",
    received_at="2026-01-02T03:04:05Z",
)


def stored(**changes: Any) -> bytes:
    document: dict[str, Any] = json.loads(record_to_json(RECORD))
    for key, value in changes.items():
        if value is ...:
            del document[key]
        else:
            document[key] = value
    return json.dumps(document).encode()


@pytest.mark.parametrize("payload_format", list(PayloadFormat))
def test_a_record_round_trips(payload_format: PayloadFormat) -> None:
    record = UploadRecord(
        sha256=RECORD.sha256, size_bytes=0, format=payload_format, filename="model.tar", received_at="now"
    )
    assert record_from_json(record_to_json(record)) == record


def test_the_stored_form_is_camel_case_with_the_format_value() -> None:
    assert json.loads(record_to_json(RECORD)) == {
        "sha256": RECORD.sha256,
        "sizeBytes": 4_920_733_696,
        "format": "GGUF",
        "filename": "llama-3.1-8b.Q4_K_M.gguf",
        "receivedAt": "2026-01-02T03:04:05Z",
    }
    assert record_to_json(RECORD) == record_to_json(record_from_json(record_to_json(RECORD)))


def test_unknown_keys_are_ignored() -> None:
    assert record_from_json(stored(uploader="alice")) == RECORD


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"{",
        b"null",
        b"[]",
        b"42",
        b'"upload"',
        b"{}",
        stored(sha256=...),
        stored(sizeBytes=...),
        stored(format=...),
        stored(filename=...),
        stored(receivedAt=...),
        stored(sizeBytes="big"),
        stored(sizeBytes=None),
        stored(sizeBytes=[1]),
        stored(format="Rar"),
        stored(format="gguf"),
        stored(format=None),
    ],
)
def test_garbage_is_an_upload_record_error(data: bytes) -> None:
    with pytest.raises(UploadRecordError, match="unreadable upload record"):
        record_from_json(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


@given(data=st.binary(max_size=40) | JSON.map(lambda value: json.dumps(value).encode()))
@BOUNDED
def test_arbitrary_input_is_a_record_or_an_upload_record_error(data: bytes) -> None:
    try:
        record = record_from_json(data)
    except UploadRecordError:
        return
    assert isinstance(record.format, PayloadFormat)
