"""Byte counts for people (pure): one rendering for status fields, messages and progress."""

from __future__ import annotations

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def size_text(count: int) -> str:
    """Exact below 1 KiB (`512 B`), else one decimal in the largest binary unit (`12.3 GiB`)."""
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in _UNITS:
        value /= 1024
        # Rounded, 1023.96 MiB would print as "1024.0 MiB": the next unit says it shorter.
        if round(value, 1) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")
