"""The one mapping from the HTTP status a provider refused with to the error it means; every API
(a Hub listing, a Hub repository, another cluster's listing) says its own words through it."""

from __future__ import annotations

import pytest

from ai_models.adapters.hub.errors import (
    ProviderError,
    ProviderErrorReason,
    ProviderRateLimited,
    Refusals,
    refusal,
)

SAYS = Refusals(
    unauthorized="who are you",
    forbidden="not yours",
    not_found="no such thing",
    rate_limited="slow down",
    unavailable="broken",
    redirect="elsewhere",
    rejected="bad request",
)


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (401, ProviderErrorReason.UNAUTHORIZED, "who are you"),
        (403, ProviderErrorReason.FORBIDDEN, "not yours"),
        (404, ProviderErrorReason.NOT_FOUND, "no such thing"),
        (500, ProviderErrorReason.UNAVAILABLE, "broken"),
        (503, ProviderErrorReason.UNAVAILABLE, "broken"),
        (599, ProviderErrorReason.UNAVAILABLE, "broken"),
        (301, ProviderErrorReason.INVALID_RESPONSE, "elsewhere"),
        (308, ProviderErrorReason.INVALID_RESPONSE, "elsewhere"),
        (400, ProviderErrorReason.REQUEST_REJECTED, "bad request"),
        (410, ProviderErrorReason.REQUEST_REJECTED, "bad request"),
        (422, ProviderErrorReason.REQUEST_REJECTED, "bad request"),
    ],
)
def test_each_status_means_one_error_with_the_callers_words(
    status: int, reason: ProviderErrorReason, message: str
) -> None:
    error = refusal(status, endpoint="https://hub.example", says=SAYS, retry_after=7)
    assert isinstance(error, ProviderError)
    assert (error.reason, error.message, error.status, error.endpoint) == (
        reason,
        message,
        status,
        "https://hub.example",
    )


def test_a_rate_limit_carries_the_wait_it_asked_for() -> None:
    error = refusal(429, endpoint="https://hub.example", says=SAYS, retry_after=42)
    assert isinstance(error, ProviderRateLimited)
    assert (error.reason, error.message, error.retry_after, error.status) == (
        ProviderErrorReason.RATE_LIMITED,
        "slow down",
        42,
        429,
    )
