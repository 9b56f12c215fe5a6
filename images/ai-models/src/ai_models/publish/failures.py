"""Why a publication stops, in the Model's reason vocabulary, and how source and store errors map to it."""

from __future__ import annotations

from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderForbidden,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.objectstore import ObjectStoreError
from ai_models.domain.publication.outcome import PublicationOutcome
from ai_models.names import ModelReason


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


def store_failure(error: ObjectStoreError) -> PublicationFailure:
    return PublicationFailure(
        ModelReason.PUBLICATION_FAILED,
        f"the object store failed: {error}; the publication is retried",
        retryable=True,
    )
