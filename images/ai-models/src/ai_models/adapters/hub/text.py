"""Small helpers both Hub adapters (catalog listing, repository downloads) share."""

from __future__ import annotations

import urllib.parse


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, default ports filled in: a token never leaves its origin."""
    parsed = urllib.parse.urlsplit(url)
    default_port = {"http": 80, "https": 443}.get(parsed.scheme)
    return parsed.scheme, (parsed.hostname or "").lower(), parsed.port or default_port
