"""How often and how patiently one file is tried again after a momentary failure."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from ai_models.adapters.hub.errors import ProviderError, ProviderRateLimited, ProviderUnavailable
from ai_models.adapters.objectstore import ObjectStoreError, SizeMismatch
from ai_models.adapters.serving.client import Momentary
from ai_models.domain.backoff import Backoff


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries per file, waiting `base_seconds`, then twice as long each time (at most
    `max_seconds`); a rate limit's own wait is honoured up to `max_rate_limit_seconds`."""

    attempts: int = 4
    base_seconds: float = 1.0
    max_seconds: float = 16.0
    max_rate_limit_seconds: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int, error: Exception) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when `error` is not worth a retry."""
        if attempt >= self.attempts or not momentary(error):
            return None
        backoff = Backoff(base=self.base_seconds, cap=self.max_seconds).delay(attempt)
        if isinstance(error, ProviderRateLimited):
            if error.retry_after > self.max_rate_limit_seconds:
                return None
            return max(backoff, float(error.retry_after))
        return backoff


def momentary(error: Exception) -> bool:
    """Failures a second try may not meet: an unavailable or rate-limiting source, a store error,
    a download that ended early (the listed size was not reached), another cluster's serving API
    that failed for now."""
    if isinstance(error, ProviderError):
        return isinstance(error, (ProviderUnavailable, ProviderRateLimited))
    return isinstance(error, (ObjectStoreError, SizeMismatch, Momentary))
