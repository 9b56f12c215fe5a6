"""A parsed openAPIV3Schema node: the raw JSON plus the attributes validation reads on every object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import re2

MISSING: Any = object()


def child_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index_path(path: str, index: int | str) -> str:
    return f"{path}[{index}]"


@dataclass
class SchemaNode:
    raw: Mapping[str, Any]
    schema_path: str
    type: str = ""
    properties: dict[str, SchemaNode] = field(default_factory=dict)
    items: SchemaNode | None = None
    additional: SchemaNode | None = None
    additional_allowed: bool = False
    nullable: bool = False
    preserve_unknown: bool = False
    int_or_string: bool = False
    embedded: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str | None = None
    required: tuple[str, ...] = ()
    enum: list[Any] | None = None
    pattern: Any = None
    format: str = ""
    default: Any = MISSING
    all_of: list[SchemaNode] = field(default_factory=list)
    any_of: list[SchemaNode] = field(default_factory=list)
    one_of: list[SchemaNode] = field(default_factory=list)
    not_: SchemaNode | None = None
    # CEL rules (kubeemu.crdvalidation.cel.CELRule) attached by the schema loader.
    rules: list[Any] = field(default_factory=list)
    pattern_error: str = ""

    @property
    def has_properties(self) -> bool:
        return bool(self.properties)

    def describes_object(self) -> bool:
        return self.type == "object" or bool(self.properties) or self.additional is not None

    @classmethod
    def parse(cls, raw: Mapping[str, Any], schema_path: str) -> SchemaNode:
        node = cls(raw=raw, schema_path=schema_path)
        node.type = raw.get("type", "") if isinstance(raw.get("type", ""), str) else ""
        for name, sub in (raw.get("properties") or {}).items():
            if isinstance(sub, Mapping):
                node.properties[name] = cls.parse(sub, f"{schema_path}.properties[{name}]")
        items = raw.get("items")
        if isinstance(items, Mapping):
            node.items = cls.parse(items, f"{schema_path}.items")
        extra = raw.get("additionalProperties")
        if isinstance(extra, Mapping):
            node.additional = cls.parse(extra, f"{schema_path}.additionalProperties")
        elif extra is True:
            node.additional_allowed = True
        node.nullable = raw.get("nullable") is True
        node.preserve_unknown = raw.get("x-kubernetes-preserve-unknown-fields") is True
        node.int_or_string = raw.get("x-kubernetes-int-or-string") is True
        node.embedded = raw.get("x-kubernetes-embedded-resource") is True
        node.list_type = raw.get("x-kubernetes-list-type")
        node.list_map_keys = tuple(raw.get("x-kubernetes-list-map-keys") or ())
        node.map_type = raw.get("x-kubernetes-map-type")
        node.required = tuple(raw.get("required") or ())
        node.enum = list(raw["enum"]) if isinstance(raw.get("enum"), list) else None
        node.format = raw.get("format", "") or ""
        if "default" in raw:
            node.default = raw["default"]
        if isinstance(raw.get("pattern"), str):
            try:
                node.pattern = re2.compile(raw["pattern"])
            except re2.error as exc:
                node.pattern_error = str(exc)
        for keyword, target in (("allOf", node.all_of), ("anyOf", node.any_of), ("oneOf", node.one_of)):
            for i, sub in enumerate(raw.get(keyword) or []):
                if isinstance(sub, Mapping):
                    target.append(cls.parse(sub, f"{schema_path}.{keyword}[{i}]"))
        if isinstance(raw.get("not"), Mapping):
            node.not_ = cls.parse(raw["not"], f"{schema_path}.not")
        return node

    def walk(self) -> list[SchemaNode]:
        """This node and every node below it, value validations included."""
        out = [self]
        for sub in self.children():
            out.extend(sub.walk())
        return out

    def children(self) -> list[SchemaNode]:
        subs = list(self.properties.values())
        if self.items is not None:
            subs.append(self.items)
        if self.additional is not None:
            subs.append(self.additional)
        subs.extend(self.all_of + self.any_of + self.one_of)
        if self.not_ is not None:
            subs.append(self.not_)
        return subs
