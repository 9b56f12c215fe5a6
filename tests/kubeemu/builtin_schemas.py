"""The built-in kinds' OpenAPI definitions (Kubernetes 1.34, as shipped by `kubernetes-validate`).

Used for two apiserver behaviours that need the real type information: strategic-merge-patch
list semantics (merge keys, strategies) and strict field validation (unknown fields in a body).
Loaded lazily once per process (about 1.5 MB of JSON).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import kubernetes_validate

KUBERNETES_SCHEMA_VERSION = "v1.34.0"
_REF_PREFIX = "#/$defs/"


class BuiltinSchemas:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self._defs = definitions
        self._by_gvk: dict[tuple[str, str, str], dict[str, Any]] = {}
        for definition in definitions.values():
            for gvk in definition.get("x-kubernetes-group-version-kind") or []:
                self._by_gvk[(gvk["group"], gvk["version"], gvk["kind"])] = definition

    def for_kind(self, api_version: str, kind: str) -> dict[str, Any] | None:
        group, _, version = api_version.rpartition("/")
        return self._by_gvk.get((group, version, kind))

    def resolve(self, node: Any) -> Any:
        while isinstance(node, dict) and "$ref" in node:
            node = self._defs.get(node["$ref"][len(_REF_PREFIX) :], {})
        return node

    def field_meta(self, node: Any, key: str) -> tuple[Any, str | None, str]:
        """Strategic-merge metadata of `key` inside map schema `node` ("[]" means the list's items)."""
        node = self.resolve(node)
        if not isinstance(node, dict):
            return None, None, ""
        if key == "[]":
            return self.resolve(node.get("items")), None, ""
        prop = (node.get("properties") or {}).get(key)
        if prop is None:
            extra = node.get("additionalProperties")
            prop = extra if isinstance(extra, dict) else None
        if prop is None:
            return None, None, ""
        return prop, prop.get("x-kubernetes-patch-merge-key"), prop.get("x-kubernetes-patch-strategy", "")

    def unknown_fields(self, obj: Any, node: Any, path: str = "") -> list[str]:
        """Paths (`spec.template.spec.containers[0].imagee`) of fields the type does not declare."""
        node = self.resolve(node)
        if not isinstance(node, dict):
            return []
        out: list[str] = []
        if isinstance(obj, dict):
            props = node.get("properties")
            extra = node.get("additionalProperties")
            for key, value in obj.items():
                child_path = f"{path}.{key}" if path else key
                if props is not None and key in props:
                    out.extend(self.unknown_fields(value, props[key], child_path))
                elif isinstance(extra, dict):
                    out.extend(self.unknown_fields(value, extra, child_path))
                elif props is not None:
                    out.append(child_path)
        elif isinstance(obj, list) and "items" in node:
            for index, item in enumerate(obj):
                out.extend(self.unknown_fields(item, node["items"], f"{path}[{index}]"))
        return out


@functools.cache
def builtin_schemas() -> BuiltinSchemas:
    root = (
        Path(kubernetes_validate.__file__).parent
        / "kubernetes-json-schema"
        / f"{KUBERNETES_SCHEMA_VERSION}-local"
    )
    with (root / "_definitions.json").open() as fh:
        return BuiltinSchemas(json.load(fh)["$defs"])
