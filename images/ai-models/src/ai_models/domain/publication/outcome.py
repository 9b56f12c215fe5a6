"""What a finished publish Job tells the controller, through its Pod's termination message.

The artifact itself (manifest and files in the object store) is the result of a successful
publication; the termination message only carries why a publication failed, in the Model's own
reason vocabulary, so the controller can set the condition without parsing logs. It stays well
under the kubelet's 4 KiB limit.
"""

from __future__ import annotations

import dataclasses
import json

from ai_models.names import ModelReason

MAX_MESSAGE_CHARS = 3000

# Reasons a publisher may report; anything else (or no message, e.g. a killed Pod) is a transient
# failure the controller retries.
REPORTABLE_REASONS = frozenset(
    {
        ModelReason.ARTIFACT_PUBLISHED,
        ModelReason.PUBLICATION_FAILED,
        ModelReason.SOURCE_NOT_FOUND,
        ModelReason.UNSUPPORTED_SOURCE,
        ModelReason.ARTIFACT_DAMAGED,
        ModelReason.INSUFFICIENT_STORAGE,
    }
)


@dataclasses.dataclass(frozen=True)
class PublicationOutcome:
    reason: ModelReason
    message: str
    digest: str | None = None
    retryable: bool = False  # the source or the store failed for now; a new Job may succeed


def bounded_message(message: str) -> str:
    """The longest prefix of `message` whose JSON form takes at most MAX_MESSAGE_CHARS characters.

    Counting characters of the message is not enough: the JSON form is ASCII, so every non-ASCII
    or control character grows into a `\\uXXXX` escape (two for characters outside the BMP).
    """
    kept: list[str] = []
    used = 0
    for char in message[:MAX_MESSAGE_CHARS]:
        used += len(json.dumps(char)) - 2
        if used > MAX_MESSAGE_CHARS:
            break
        kept.append(char)
    return "".join(kept)


def outcome_to_json(outcome: PublicationOutcome) -> str:
    document = {
        "reason": outcome.reason.value,
        "message": bounded_message(outcome.message),
        "retryable": outcome.retryable,
    } | ({"digest": outcome.digest} if outcome.digest else {})
    return json.dumps(document, sort_keys=True)


def outcome_from_json(text: str | None) -> PublicationOutcome | None:
    """The outcome, or None when the message is absent or not ours (logs of a crashed Pod)."""
    if not text:
        return None
    try:
        document = json.loads(text)
        reason = ModelReason(document["reason"])
    except (ValueError, KeyError, TypeError):
        return None
    if reason not in REPORTABLE_REASONS:
        return None
    return PublicationOutcome(
        reason=reason,
        message=str(document.get("message", "")),
        digest=document.get("digest") or None,
        retryable=bool(document.get("retryable", False)),
    )
