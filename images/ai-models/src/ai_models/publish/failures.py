"""Why a publication stops, in the Model's reason vocabulary, and how source and store errors map to it."""

from __future__ import annotations

import errno
import logging
import re

from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderForbidden,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.domain.artifacts.sniff import ACCEPTED_DESCRIPTION
from ai_models.domain.publication.outcome import PublicationOutcome
from ai_models.names import ModelReason

logger = logging.getLogger(__name__)

# A provider's error code (S3 `AccessDenied`, `SlowDown`) may be shown; its message may not.
_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9.]{0,63}")


class PublicationFailure(Exception):
    """The publication cannot finish; `reason` and `message` become the termination message.

    `retryable` says that a new Job may succeed (the source or the store failed for now).
    """

    def __init__(self, reason: ModelReason, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retryable = retryable

    def outcome(self, digest: str) -> PublicationOutcome:
        return PublicationOutcome(
            reason=self.reason, message=self.message, digest=digest, retryable=self.retryable
        )


def source_failure(error: ProviderError) -> PublicationFailure:
    """A Hub error as a publication failure; the Hub's message already names the object and the fix."""
    if isinstance(error, ProviderNotFound):
        return PublicationFailure(ModelReason.SOURCE_NOT_FOUND, error.message)
    if isinstance(error, (ProviderUnauthorized, ProviderForbidden)):
        return PublicationFailure(ModelReason.PUBLICATION_FAILED, error.message)
    if isinstance(error, (ProviderRateLimited, ProviderUnavailable)):
        return PublicationFailure(ModelReason.PUBLICATION_FAILED, error.message, retryable=True)
    return PublicationFailure(ModelReason.PUBLICATION_FAILED, error.message)


def unsupported(cause: str) -> PublicationFailure:
    """An uploaded payload that is not a model; `cause` names the member or the limit, never a store path.
    The controller's message already says that the upload could not be published: this is the why."""
    return PublicationFailure(ModelReason.UNSUPPORTED_SOURCE, f"{cause}; expected {ACCEPTED_DESCRIPTION}")


def store_failure(error: ObjectStoreError) -> PublicationFailure:
    """The store failed for now. Its own message names the store (a directory, an endpoint URL)
    and the key: that goes to the Job's log, and the Model's status says only what kind of failure
    it was, for every reader of the status to see."""
    logger.error("object store failed", extra={"error": str(error)})
    code = _cause_code(error)
    hint = f": {error.hint}" if error.hint else ""
    return PublicationFailure(
        ModelReason.PUBLICATION_FAILED,
        f"the object store failed{f' ({code})' if code else ''}{hint}; the publication is retried; the "
        "log of the publish Job names the object and the cause",
        retryable=True,
    )


def unexpected_failure(error: Exception) -> PublicationFailure:
    """A bug or an error nobody foresaw: its text may hold paths or URLs, so only its type is shown
    (the caller logs it whole); the controller's bounded retries decide."""
    return PublicationFailure(
        ModelReason.PUBLICATION_FAILED,
        f"the publisher failed unexpectedly ({type(error).__name__}); see the log of the publish Job",
        retryable=True,
    )


def _cause_code(error: BaseException) -> str | None:
    """The errno name or the S3 error code behind a store error, if there is one."""
    cause: BaseException | None = error
    for _depth in range(4):
        if cause is None:
            return None
        number = cause.errno if isinstance(cause, OSError) else None
        if number is not None and number in errno.errorcode:
            return errno.errorcode[number]
        response = getattr(cause, "response", None)
        code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
        if isinstance(code, str) and _ERROR_CODE.fullmatch(code):
            return code
        cause = cause.__cause__
    return None
