"""Inclusive byte ranges, as `open_range` takes them and HTTP `Range` spells them."""

from __future__ import annotations


def check_range(start: int, end: int | None) -> int | None:
    """Validate `start..end` (inclusive) and return how many bytes it spans; None means to the end."""
    if start < 0:
        raise ValueError(f"a range starts at 0 or later, got start={start}")
    if end is None:
        return None
    if end < start:
        raise ValueError(f"a range ends at or after its start, got start={start}, end={end}")
    return end - start + 1


def http_range(start: int, end: int | None) -> str | None:
    """The `Range` header for `start..end`, or None when the whole object is wanted.

    Leaving the header out for a whole read matters: S3 answers any range on an empty object
    with 416, while a plain GET returns the empty body.
    """
    if start == 0 and end is None:
        return None
    return f"bytes={start}-{'' if end is None else end}"
