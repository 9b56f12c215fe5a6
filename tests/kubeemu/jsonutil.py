"""JSON documents as the emulator keeps them: plain dicts/lists, copied cheaply, decoded strictly."""

from __future__ import annotations

import json
from typing import Any, TypeVar

T = TypeVar("T")


def jsoncopy(value: T) -> T:
    """Deep copy of a JSON value; several times faster than `copy.deepcopy` for plain data."""
    if isinstance(value, dict):
        return {k: jsoncopy(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [jsoncopy(v) for v in value]  # type: ignore[return-value]
    return value


class DuplicateFieldError(ValueError):
    """A JSON object repeated a key; the apiserver reports this in strict field validation."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def loads_checking_duplicates(raw: bytes | str) -> tuple[Any, list[str]]:
    """Decode JSON and also return the keys that were repeated inside one object (last one wins)."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    return json.loads(raw, object_pairs_hook=pairs), duplicates


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def get_path(obj: Any, dotted: str) -> Any:
    """`status.phase` → obj["status"]["phase"], or None when any step is missing."""
    current = obj
    for part in dotted.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current
