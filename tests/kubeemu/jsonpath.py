"""The JSONPath subset of CRD printer columns and kubectl: `.a.b`, `['a.b']`, `[0]`, `[*]`,
and filters `[?(@.type=="Ready")]` with ==, !=, <, >, <=, >= (and `{...}` braces)."""

from __future__ import annotations

import json
import re
from typing import Any

_FILTER = re.compile(r"^\?\(@((?:\.[A-Za-z0-9_\-]+|\['[^']*'\])*)\s*(==|!=|<=|>=|<|>)\s*(.+)\)$")


class JSONPathError(ValueError):
    pass


def _steps(path: str) -> list[str]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if text.startswith("$"):
        text = text[1:]
    steps: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == ".":
            j = i + 1
            while j < len(text) and text[j] not in ".[":
                j += 1
            if j > i + 1:
                steps.append("." + text[i + 1 : j])
            i = j
        elif text[i] == "[":
            depth, j = 0, i
            while j < len(text):
                if text[j] == "[":
                    depth += 1
                elif text[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(text):
                raise JSONPathError(f"unterminated [ in {path!r}")
            steps.append(text[i : j + 1])
            i = j + 1
        else:
            raise JSONPathError(f"unexpected {text[i]!r} in {path!r}")
    return steps


def _literal(text: str) -> Any:
    text = text.strip()
    if text[:1] in ("'", '"'):
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _compare(left: Any, op: str, right: Any) -> bool:
    try:
        if op == "==":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == ">":
            return bool(left > right)
        if op == "<=":
            return bool(left <= right)
        return bool(left >= right)
    except TypeError:
        return False


def find(obj: Any, path: str) -> list[Any]:
    """All values `path` selects in `obj` (empty when nothing matches)."""
    current = [obj]
    for step in _steps(path):
        nxt: list[Any] = []
        for value in current:
            if step.startswith("."):
                if isinstance(value, dict) and step[1:] in value:
                    nxt.append(value[step[1:]])
                continue
            inner = step[1:-1].strip()
            if inner == "*":
                if isinstance(value, list):
                    nxt.extend(value)
                elif isinstance(value, dict):
                    nxt.extend(value.values())
            elif inner[:1] in ("'", '"'):
                key = inner[1:-1]
                if isinstance(value, dict) and key in value:
                    nxt.append(value[key])
            elif inner.startswith("?"):
                match = _FILTER.match(inner)
                if not match:
                    raise JSONPathError(f"unsupported filter {inner!r}")
                sub_path, op, literal = match.groups()
                wanted = _literal(literal)
                for item in value if isinstance(value, list) else []:
                    got = find(item, sub_path) if sub_path else [item]
                    if got and _compare(got[0], op, wanted):
                        nxt.append(item)
            elif re.fullmatch(r"-?\d+", inner):
                index = int(inner)
                if isinstance(value, list) and -len(value) <= index < len(value):
                    nxt.append(value[index])
            else:
                raise JSONPathError(f"unsupported step {step!r}")
        current = nxt
    return current
