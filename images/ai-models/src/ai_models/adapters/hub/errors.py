"""Provider errors: what went wrong talking to a Hub, as the controller reports it on a source.

Each class carries a CamelCase `reason` for the source's conditions and a message that names the
endpoint and what the admin can change. Messages never contain the token, and never anything the
remote sent (its body, its message header, the hosts it links to): only the HTTP status and the
provider's `X-Error-Code` when that is a plain identifier. Status and Events are read by every
User; a hostile or confused endpoint must not be able to write into them.
"""

from __future__ import annotations

import dataclasses
import datetime
import email.utils
import enum
import math
import re
from collections.abc import Mapping

# Public, but the lazy `huggingface_hub.utils` facade hides it from strict mypy (see client.py).
from huggingface_hub.utils import parse_ratelimit_headers  # type: ignore[attr-defined]

# When a 429 says nothing about when to come back, wait this long: half a minute is short
# against the Hub's 5-minute windows and long enough not to hammer a struggling mirror.
DEFAULT_RETRY_AFTER_SECONDS = 30


class ProviderErrorReason(enum.StrEnum):
    UNAUTHORIZED = "ProviderUnauthorized"
    FORBIDDEN = "ProviderForbidden"
    NOT_FOUND = "ProviderNotFound"
    RATE_LIMITED = "ProviderRateLimited"
    UNAVAILABLE = "ProviderUnavailable"
    REQUEST_REJECTED = "ProviderRequestRejected"
    INVALID_RESPONSE = "ProviderInvalidResponse"
    ENDPOINT_REFUSED = "ProviderEndpointRefused"


class ProviderError(Exception):
    """A Hub request failed in a way the pass cannot work around; the pass stops at its checkpoint."""

    reason: ProviderErrorReason

    def __init__(self, message: str, *, endpoint: str, status: int | None = None) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status

    @property
    def message(self) -> str:
        return str(self)


class ProviderUnauthorized(ProviderError):
    reason = ProviderErrorReason.UNAUTHORIZED


class ProviderForbidden(ProviderError):
    reason = ProviderErrorReason.FORBIDDEN


class ProviderNotFound(ProviderError):
    reason = ProviderErrorReason.NOT_FOUND


class ProviderRateLimited(ProviderError):
    reason = ProviderErrorReason.RATE_LIMITED

    def __init__(self, message: str, *, endpoint: str, retry_after: int, status: int | None = 429) -> None:
        super().__init__(message, endpoint=endpoint, status=status)
        self.retry_after = retry_after


class ProviderUnavailable(ProviderError):
    reason = ProviderErrorReason.UNAVAILABLE


class ProviderRequestRejected(ProviderError):
    reason = ProviderErrorReason.REQUEST_REJECTED


class ProviderInvalidResponse(ProviderError):
    reason = ProviderErrorReason.INVALID_RESPONSE


class ProviderEndpointRefused(ProviderError):
    """The endpoint (or where it redirected, or what its name resolved to) is an address the module
    never contacts: a cloud metadata service, or a link-local address the admin has not allowed."""

    reason = ProviderErrorReason.ENDPOINT_REFUSED


@dataclasses.dataclass(frozen=True)
class Refusals:
    """What one API says for each kind of refusal. The cause and the fix differ per API (a Hub
    listing, a repository, another cluster's listing); which error a status means does not
    (`refusal`)."""

    unauthorized: str
    forbidden: str
    not_found: str
    rate_limited: str
    unavailable: str
    redirect: str  # a redirect that was not followed
    rejected: str  # any other status


def refusal(status: int, *, endpoint: str, says: Refusals, retry_after: int) -> ProviderError:
    """The one mapping from the HTTP status a provider refused a request with to the error it means;
    `retry_after`: the seconds a 429 asks for (`retry_after_seconds`)."""
    if status == 429:
        return ProviderRateLimited(says.rate_limited, endpoint=endpoint, retry_after=retry_after)
    kind: type[ProviderError]
    message: str
    if status == 401:
        kind, message = ProviderUnauthorized, says.unauthorized
    elif status == 403:
        kind, message = ProviderForbidden, says.forbidden
    elif status == 404:
        kind, message = ProviderNotFound, says.not_found
    elif status >= 500:
        kind, message = ProviderUnavailable, says.unavailable
    elif 300 <= status < 400:
        kind, message = ProviderInvalidResponse, says.redirect
    else:
        kind, message = ProviderRequestRejected, says.rejected
    return kind(message, endpoint=endpoint, status=status)


_IETF_RESET = re.compile(r"^\s*(\d+)\s*$")


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime.datetime) -> int:
    """Seconds to wait after a 429, from the first header that says.

    `Retry-After` (delay-seconds or an HTTP date), then the IETF `RateLimit: "api";r=0;t=55` the Hub
    sends, then the older draft's `RateLimit-Reset: 55`. Never less than one second, so a date
    already in the past does not turn into a hot retry loop.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    seconds = _from_retry_after(lowered.get("retry-after"), now=now)
    if seconds is None:
        info = parse_ratelimit_headers(lowered)
        seconds = info.reset_in_seconds if info is not None else None
    if seconds is None:
        match = _IETF_RESET.match(lowered.get("ratelimit-reset", ""))
        seconds = int(match.group(1)) if match else None
    if seconds is None:
        return DEFAULT_RETRY_AFTER_SECONDS
    return max(1, seconds)


def _from_retry_after(value: str | None, *, now: datetime.datetime) -> int | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT even when the zone is spelt oddly
        when = when.replace(tzinfo=datetime.UTC)
    return math.ceil((when - now).total_seconds())
