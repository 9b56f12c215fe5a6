"""Label and field selectors: the query-string grammar of `labelSelector`/`fieldSelector`,
and `metav1.LabelSelector` objects (matchLabels/matchExpressions) used inside objects."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeemu import errors


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # = != in notin exists !exists gt lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in ("gt", "lt"):
            try:
                number = int(value or "")
            except ValueError:
                return False
            bound = int(self.values[0])
            return number > bound if self.op == "gt" else number < bound
        raise AssertionError(self.op)


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if not match:
            raise errors.bad_request(
                f"unable to parse requirement: unexpected character at {pos} in {text!r}"
            )
        out.append(match.group(1))
        pos = match.end()
    return out


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`, rejecting what `labels.Parse` rejects."""
    if not text:
        return LabelSelector()
    tokens = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def fail(why: str) -> errors.APIError:
        return errors.bad_request(f"unable to parse requirement: {why}")

    def expect_value(pos: int) -> tuple[str, int]:
        if pos < len(tokens) and tokens[pos] not in {",", "(", ")", "=", "==", "!=", "!"}:
            return tokens[pos], pos + 1
        return "", pos  # `key=` selects an empty value

    while i < len(tokens):
        tok = tokens[i]
        if tok == "!":
            if i + 1 >= len(tokens):
                raise fail("found '', expected: identifier")
            reqs.append(Requirement(tokens[i + 1], "!exists"))
            i += 2
        else:
            key = tok
            if key in {",", "(", ")", "=", "==", "!="}:
                raise fail(f"found '{key}', expected: !, identifier, or 'end of string'")
            i += 1
            if i >= len(tokens) or tokens[i] == ",":
                reqs.append(Requirement(key, "exists"))
            elif tokens[i] in {"=", "=="}:
                value, i = expect_value(i + 1)
                reqs.append(Requirement(key, "=", (value,)))
            elif tokens[i] == "!=":
                value, i = expect_value(i + 1)
                reqs.append(Requirement(key, "!=", (value,)))
            elif tokens[i] in {">", "<"}:
                op = "gt" if tokens[i] == ">" else "lt"
                value, i = expect_value(i + 1)
                if not re.fullmatch(r"-?\d+", value):
                    raise fail(f"for 'Gt', 'Lt' operators, the value must be an integer, got {value!r}")
                reqs.append(Requirement(key, op, (value,)))
            elif tokens[i] in {"in", "notin"}:
                op = tokens[i]
                i += 1
                if i >= len(tokens) or tokens[i] != "(":
                    raise fail("found '', expected: '('")
                i += 1
                values: list[str] = []
                while i < len(tokens) and tokens[i] != ")":
                    if tokens[i] != ",":
                        values.append(tokens[i])
                    i += 1
                if i >= len(tokens):
                    raise fail("found '', expected: ')'")
                i += 1
                reqs.append(Requirement(key, op, tuple(values) or ("",)))
            else:
                raise fail(f"found '{tokens[i]}', expected: '=', '!=', '==', 'in', notin'")
        if i < len(tokens):
            if tokens[i] != ",":
                raise fail(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
    return LabelSelector(tuple(reqs))


def selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector | None:
    """A `metav1.LabelSelector` object; None (matches nothing) for a null selector, as the apiserver does."""
    if selector is None:
        return None
    reqs = [Requirement(k, "=", (str(v),)) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    op_names = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in selector.get("matchExpressions") or []:
        op = op_names.get(expr.get("operator", ""))
        if op is None:
            return None
        reqs.append(Requirement(expr.get("key", ""), op, tuple(expr.get("values") or ())))
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any], lookup: Callable[[Mapping[str, Any], str], str]) -> bool:
        for req in self.requirements:
            equal = lookup(obj, req.path) == req.value
            if equal == req.negate:
                return False
        return True

    def exact_name(self) -> str | None:
        """The name a `metadata.name=x` selector pins, used (like the apiserver) for authorization."""
        for req in self.requirements:
            if req.path == "metadata.name" and not req.negate:
                return req.value
        return None


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text:
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for part in _split_unescaped(text, ","):
        if not part:
            continue
        match = re.match(r"^([^=!]+)(!=|==|=)(.*)$", part)
        if not match:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = match.groups()
        reqs.append(FieldRequirement(path.strip(), _unescape(value), negate=op == "!="))
    return FieldSelector(tuple(reqs))


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares against: "" when absent, `true`/`false` for booleans."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, (dict, list)):
        return ""
    return str(current)
