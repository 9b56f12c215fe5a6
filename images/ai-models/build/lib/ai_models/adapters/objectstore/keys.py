"""Which keys and prefixes a store accepts.

Both backends apply the same rules so that code tested against the directory store behaves the
same against S3. The rules exist for the directory store: a key becomes a path under its root, so
anything that could climb out of the root or name the same file twice is refused.
"""

from __future__ import annotations

# The directory store writes into hidden `.tmp-*` files and renames them into place; keys may not
# use the name, or a half-written file could pass for an object.
RESERVED_SEGMENT_PREFIX = ".tmp-"

# S3 caps keys at 1,024 bytes of UTF-8; file systems cap one path segment at 255 bytes.
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255

_RULES = "keys are relative '/'-separated paths without empty, '.' or '..' segments"


class InvalidKey(ValueError):
    """A key or prefix breaks the rules; raised before any I/O."""

    def __init__(self, key: str, reason: str) -> None:
        # A hostile key can be megabytes long; the message shows its start.
        shown = repr(key) if len(key) <= 120 else f"{key[:120]!r}... ({len(key)} characters)"
        super().__init__(f"invalid object key {shown}: {reason}; {_RULES}")
        self.key = key


def validate_key(key: str) -> str:
    """Return `key` unchanged when it is acceptable; raise InvalidKey otherwise."""
    if not isinstance(key, str) or not key:
        raise InvalidKey(str(key), "empty")
    _check_text(key)
    if key.endswith("/"):
        raise InvalidKey(key, "ends with '/', which names a prefix, not an object")
    for segment in key.split("/"):
        _check_segment(key, segment)
    return key


def validate_prefix(prefix: str, *, allow_empty: bool = True) -> str:
    """Return `prefix` unchanged when it is acceptable; raise InvalidKey otherwise.

    A prefix is a plain string prefix of keys, so its last segment may be partial (`catalog/h`
    matches `catalog/hf/...`) or empty (`catalog/`); that segment is only ever compared, never
    turned into a path, so it is not checked like a whole segment.
    """
    if not isinstance(prefix, str):
        raise InvalidKey(str(prefix), "not a string")
    if not prefix:
        if allow_empty:
            return prefix
        raise InvalidKey(prefix, "empty prefix")
    _check_text(prefix)
    *whole, _partial = prefix.split("/")
    for segment in whole:
        _check_segment(prefix, segment)
    return prefix


def _check_text(key: str) -> None:
    if key.startswith("/"):
        raise InvalidKey(key, "absolute path")
    if "\\" in key:
        raise InvalidKey(key, "contains a backslash")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in key):
        raise InvalidKey(key, "contains a control character")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKey(key, "not valid Unicode (lone surrogate)") from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidKey(key, f"longer than {MAX_KEY_BYTES} bytes")


def _check_segment(key: str, segment: str) -> None:
    if not segment:
        raise InvalidKey(key, "empty segment ('//')")
    if segment in (".", ".."):
        raise InvalidKey(key, f"{segment!r} segment")
    if segment.startswith(RESERVED_SEGMENT_PREFIX):
        raise InvalidKey(key, f"segments starting with {RESERVED_SEGMENT_PREFIX!r} are reserved")
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise InvalidKey(key, f"a segment is longer than {MAX_SEGMENT_BYTES} bytes")
