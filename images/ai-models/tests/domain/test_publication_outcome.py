"""What a publish Job's Pod leaves in its termination message: its own outcomes come back intact,
anything else (a crashed Pod's log lines, other reasons, garbage) reads as None, and the message
always fits the kubelet's 4 KiB limit."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ai_models.domain.publication.outcome import (
    MAX_MESSAGE_CHARS,
    REPORTABLE_REASONS,
    PublicationOutcome,
    outcome_from_json,
    outcome_to_json,
)
from ai_models.names import ModelReason

BOUNDED = settings(max_examples=200, deadline=None)
KUBELET_LIMIT_BYTES = 4096
DIGEST = "sha256:" + hashlib.sha256(b"llama").hexdigest()
NOT_REPORTABLE = sorted(set(ModelReason) - REPORTABLE_REASONS)


def test_the_reportable_reasons_are_the_publishers() -> None:
    assert {
        ModelReason.ARTIFACT_PUBLISHED,
        ModelReason.PUBLICATION_FAILED,
        ModelReason.SOURCE_NOT_FOUND,
        ModelReason.UNSUPPORTED_SOURCE,
        ModelReason.ARTIFACT_DAMAGED,
        ModelReason.INSUFFICIENT_STORAGE,
    } == REPORTABLE_REASONS
    assert ModelReason.STORAGE_USAGE_UNKNOWN in NOT_REPORTABLE
    assert ModelReason.READY in NOT_REPORTABLE


@pytest.mark.parametrize("reason", sorted(REPORTABLE_REASONS))
@pytest.mark.parametrize("retryable", [False, True])
@pytest.mark.parametrize("digest", [None, DIGEST])
def test_an_outcome_round_trips(reason: ModelReason, retryable: bool, digest: str | None) -> None:
    outcome = PublicationOutcome(
        reason=reason, message="the source has no weights", digest=digest, retryable=retryable
    )
    assert outcome_from_json(outcome_to_json(outcome)) == outcome


def test_the_stored_form() -> None:
    text = outcome_to_json(
        PublicationOutcome(reason=ModelReason.ARTIFACT_PUBLISHED, message="published", digest=DIGEST)
    )
    assert json.loads(text) == {
        "reason": "ArtifactPublished",
        "message": "published",
        "retryable": False,
        "digest": DIGEST,
    }
    without_digest = json.loads(
        outcome_to_json(
            PublicationOutcome(reason=ModelReason.PUBLICATION_FAILED, message="x", retryable=True)
        )
    )
    assert "digest" not in without_digest
    assert without_digest["retryable"] is True


def test_an_empty_digest_reads_as_none() -> None:
    outcome = PublicationOutcome(reason=ModelReason.PUBLICATION_FAILED, message="failed", digest="")
    assert outcome_from_json(outcome_to_json(outcome)) == PublicationOutcome(
        reason=ModelReason.PUBLICATION_FAILED, message="failed"
    )


@pytest.mark.parametrize("reason", NOT_REPORTABLE)
def test_reasons_a_publisher_does_not_report_read_as_none(reason: ModelReason) -> None:
    assert outcome_from_json(json.dumps({"reason": reason.value, "message": "m"})) is None
    assert outcome_from_json(outcome_to_json(PublicationOutcome(reason=reason, message="m"))) is None


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        " ",
        "Traceback (most recent call last):\n  File \"publish.py\", line 1\nKeyError: 'reason'",
        "Killed",
        "{",
        "null",
        "[]",
        '["PublicationFailed"]',
        "42",
        '"PublicationFailed"',
        "{}",
        '{"message": "no reason"}',
        '{"reason": null}',
        '{"reason": 42}',
        '{"reason": ["PublicationFailed"]}',
        '{"reason": "publicationfailed"}',
        '{"reason": "Exploded"}',
        '{"reason": "PublicationFailed"}\n{"reason": "PublicationFailed"}',  # two log lines
        '{"level": "error", "msg": "upload failed", "time": "2026-01-01T00:00:00Z"}',
    ],
)
def test_anything_that_is_not_an_outcome_reads_as_none(text: str | None) -> None:
    assert outcome_from_json(text) is None


def test_missing_optional_fields_take_their_defaults() -> None:
    assert outcome_from_json('{"reason": "SourceNotFound"}') == PublicationOutcome(
        reason=ModelReason.SOURCE_NOT_FOUND, message=""
    )


def test_a_long_message_is_truncated() -> None:
    outcome = PublicationOutcome(reason=ModelReason.PUBLICATION_FAILED, message="x" * 100_000, digest=DIGEST)
    text = outcome_to_json(outcome)
    read = outcome_from_json(text)
    assert read is not None
    assert read.message == "x" * MAX_MESSAGE_CHARS
    assert read.digest == DIGEST
    assert len(text.encode()) < KUBELET_LIMIT_BYTES


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("Не удалось загрузить файл модели. " * 200, id="cyrillic"),
        pytest.param("模型文件下载失败" * 1000, id="cjk"),
        pytest.param("🚫" * 3000, id="emoji-surrogate-pairs"),
        pytest.param('"quoted" \\path\\ ' * 500, id="escapes"),
        pytest.param("\x01" * 5000, id="control-characters"),
        pytest.param("line\n" * 2000, id="newlines"),
    ],
)
def test_a_message_that_grows_when_encoded_still_fits_the_kubelet_limit(message: str) -> None:
    outcome = PublicationOutcome(
        reason=ModelReason.PUBLICATION_FAILED, message=message, digest=DIGEST, retryable=True
    )
    text = outcome_to_json(outcome)
    assert len(text.encode()) < KUBELET_LIMIT_BYTES
    read = outcome_from_json(text)
    assert read is not None
    assert read.reason is ModelReason.PUBLICATION_FAILED
    assert read.digest == DIGEST
    assert read.retryable is True
    assert message.startswith(read.message)
    assert len(read.message) >= MAX_MESSAGE_CHARS // 12  # truncated, not dropped


@given(
    message=st.text(max_size=5000),
    reason=st.sampled_from(sorted(REPORTABLE_REASONS)),
    retryable=st.booleans(),
)
@example(message="я" * 3001, reason=ModelReason.PUBLICATION_FAILED, retryable=False)
@BOUNDED
def test_any_outcome_fits_and_reads_back_as_a_prefix(
    message: str, reason: ModelReason, retryable: bool
) -> None:
    text = outcome_to_json(
        PublicationOutcome(reason=reason, message=message, digest=DIGEST, retryable=retryable)
    )
    assert len(text.encode()) < KUBELET_LIMIT_BYTES
    read = outcome_from_json(text)
    assert read is not None
    assert (read.reason, read.digest, read.retryable) == (reason, DIGEST, retryable)
    assert message.startswith(read.message)
    if (
        len(message) <= MAX_MESSAGE_CHARS
        and message.isascii()
        and message.isprintable()
        and '"' not in message
    ):
        assert read.message == message


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.sampled_from([r.value for r in ModelReason]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["reason", "message", "digest", "retryable", "x"]), children, max_size=4
        )
    ),
    max_leaves=8,
)


@given(document=JSON)
@BOUNDED
def test_any_json_reads_as_a_reportable_outcome_or_none(document: Any) -> None:
    read = outcome_from_json(json.dumps(document))
    if read is not None:
        assert read.reason in REPORTABLE_REASONS
        assert isinstance(read.message, str)
