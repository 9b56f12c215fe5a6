"""Small helpers for the sentences the module writes into conditions, Events and answers."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files`: a count with its noun in the number it takes (English)."""
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"
