"""Which failures of one file are tried again, and after how long."""

from __future__ import annotations

from ai_models.adapters.hub.errors import (
    ProviderNotFound,
    ProviderRateLimited,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.objectstore import ObjectStoreError, SizeMismatch
from ai_models.publish.retry import RetryPolicy

POLICY = RetryPolicy(attempts=4, base_seconds=1.0, max_seconds=3.0, max_rate_limit_seconds=60.0)
UNAVAILABLE = ProviderUnavailable("503", endpoint="https://hub")


def test_momentary_failures_back_off_up_to_a_cap_then_stop() -> None:
    assert [POLICY.delay(attempt, UNAVAILABLE) for attempt in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, None]
    assert POLICY.delay(1, ObjectStoreError("store down")) == 1.0
    assert POLICY.delay(1, SizeMismatch("short")) == 1.0


def test_a_rate_limit_waits_as_asked_unless_that_is_too_long() -> None:
    limited = ProviderRateLimited("429", endpoint="https://hub", retry_after=20)
    assert POLICY.delay(1, limited) == 20.0
    too_long = ProviderRateLimited("429", endpoint="https://hub", retry_after=300)
    assert POLICY.delay(1, too_long) is None


def test_answers_that_will_not_change_are_not_retried() -> None:
    assert POLICY.delay(1, ProviderNotFound("404", endpoint="https://hub")) is None
    assert POLICY.delay(1, ProviderUnauthorized("401", endpoint="https://hub")) is None
    assert POLICY.delay(1, ValueError("a bug")) is None
