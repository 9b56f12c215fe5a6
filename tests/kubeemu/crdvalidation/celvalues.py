"""Custom-resource data as CEL sees it on the apiserver: schema-typed values and escaped field names.

Declared properties are reachable under their escaped names (`my-field` → `my__dash__field`,
`namespace` → `__namespace__`); `additionalProperties` maps keep their raw keys; strings with
format date-time/date/duration/byte become timestamps/durations/bytes; at the root only
`apiVersion`, `kind`, `metadata.name` and `metadata.generateName` are visible.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import celpy.celtypes as ct

from kubeemu.crdvalidation.node import SchemaNode

CEL_RESERVED = frozenset(
    {
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    }
)
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9\-./_])")
_REPLACEMENTS = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}


def escape(name: str) -> str | None:
    """The CEL identifier for a property name, or None when CEL cannot address it."""
    if not name or name[0].isdigit():
        return None
    if name in CEL_RESERVED:
        return f"__{name}__"
    ok = True

    def repl(match: re.Match[str]) -> str:
        nonlocal ok
        token = match.group(0)
        if token in _REPLACEMENTS:
            return _REPLACEMENTS[token]
        ok = False
        return ""

    escaped = _EXPAND.sub(repl, name)
    return escaped if ok else None


def to_cel(value: Any, schema: SchemaNode | None, *, is_resource: bool = False) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        if schema is not None and schema.type == "number":
            return ct.DoubleType(float(value))
        return ct.IntType(value)
    if isinstance(value, float):
        if schema is not None and (schema.type == "integer" or schema.int_or_string) and value.is_integer():
            return ct.IntType(int(value))
        return ct.DoubleType(value)
    if isinstance(value, str):
        return _string(value, schema)
    if isinstance(value, list):
        items = schema.items if schema is not None else None
        return ct.ListType([to_cel(item, items) for item in value])
    if isinstance(value, dict):
        return _object(value, schema, is_resource=is_resource)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _string(value: str, schema: SchemaNode | None) -> Any:
    fmt = schema.format if schema is not None else ""
    try:
        if fmt in ("date-time", "date"):
            return ct.TimestampType(value if fmt == "date-time" else f"{value}T00:00:00Z")
        if fmt == "duration":
            return ct.DurationType(value)
        if fmt == "byte":
            return ct.BytesType(base64.b64decode(value))
    except (ValueError, TypeError):
        return ct.StringType(value)
    return ct.StringType(value)


def _object(value: dict[str, Any], schema: SchemaNode | None, *, is_resource: bool) -> Any:
    if schema is not None and schema.additional is not None:
        return ct.MapType({ct.StringType(k): to_cel(v, schema.additional) for k, v in value.items()})
    out: dict[Any, Any] = {}
    embedded = is_resource or (schema is not None and schema.embedded)
    for key, sub_value in value.items():
        if embedded and key == "metadata" and isinstance(sub_value, dict):
            visible = {k: sub_value[k] for k in ("name", "generateName") if k in sub_value}
            out[ct.StringType("metadata")] = ct.MapType(
                {ct.StringType(k): ct.StringType(str(v)) for k, v in visible.items()}
            )
            continue
        sub = schema.properties.get(key) if schema is not None else None
        name = escape(key) if sub is not None or schema is None or not schema.preserve_unknown else key
        if name is None:
            continue
        out[ct.StringType(name)] = to_cel(sub_value, sub)
    return ct.MapType(out)
