"""HTTP conditional and range requests on one stored file (RFC 9110 sections 13 and 14), pure.

One range is served as 206; several ranges are answered with the whole file (200), which RFC 9110
allows (a server may ignore `Range`) and which keeps responses single-part: the module's readers
fetch one range at a time. A `Range` that is not a byte range, or not well formed, is ignored in
the same way. A single range that starts at or past the end is unsatisfiable (416).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

# ASCII only: `\d` would take other scripts' digits, and `\s` other spaces, which no client sends.
_SINGLE: Final = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE | re.ASCII)
# More digits than any offset a file can have: read as "past any end", never handed to int()
# (which refuses strings of more than 4,300 digits).
_MAX_DIGITS: Final = 19
_HUGE: Final = 10**_MAX_DIGITS


@dataclasses.dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


class RangeNotSatisfiable(ValueError):
    """The single range requested lies wholly past the end of the file."""

    def __init__(self, size: int) -> None:
        super().__init__(f"the requested range starts at or past the end of the file ({size} bytes)")
        self.size = size

    @property
    def content_range(self) -> str:
        return f"bytes */{self.size}"


def requested_range(header: str | None, *, size: int) -> ByteRange | None:
    """The one range to serve, or None for the whole file; raises RangeNotSatisfiable."""
    if not header:
        return None
    match = _SINGLE.match(header)
    if match is None:
        return None  # several ranges, another unit, or malformed: serve the whole file
    first, last = (_offset(group) if group else None for group in match.groups())
    if first is None:
        if last is None:
            return None
        suffix = last
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return ByteRange(start=max(size - suffix, 0), end=size - 1)
    start = first
    if last is not None and last < start:
        return None  # `bytes=5-2` is not a valid range: ignore it
    if start >= size:
        raise RangeNotSatisfiable(size)
    end = last if last is not None else size - 1
    return ByteRange(start=start, end=min(end, size - 1))


def _offset(digits: str) -> int:
    return _HUGE if len(digits.lstrip("0")) > _MAX_DIGITS else int(digits)


def quoted(tag: str) -> str:
    return f'"{tag}"'


def _tags(header: str) -> list[str]:
    # Weak comparison (RFC 9110 8.8.3.2): `W/"x"` matches `"x"`.
    return [part.strip().removeprefix("W/") for part in header.split(",") if part.strip()]


def none_match(header: str | None, etag: str) -> bool:
    """Whether `If-None-Match` names the current entity tag (then the answer is 304)."""
    if not header:
        return False
    tags = _tags(header)
    return "*" in tags or etag in tags


def range_applies(if_range: str | None, etag: str) -> bool:
    """Whether `Range` may be honoured: no `If-Range`, or one naming the current (strong) tag."""
    return not if_range or if_range.strip() == etag
