"""Walking OpenAPI schemas (module settings and CRDs) node by node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

SchemaPath = tuple[str, ...]


def walk(schema: dict[str, Any], path: SchemaPath = ()) -> Iterator[tuple[SchemaPath, dict[str, Any]]]:
    """Yield every schema node with its path through `properties`, `items` and `additionalProperties`."""
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from walk(child, (*path, "properties", name))
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, dict):
            yield from walk(child, (*path, key))


def descriptions(schema: dict[str, Any]) -> dict[SchemaPath, str]:
    return {path: node["description"] for path, node in walk(schema) if "description" in node}
