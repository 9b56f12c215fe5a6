"""Structural pruning and defaulting, in the apiserver's order: prune unknown fields, then apply defaults.

Ports the semantics of k8s.io/apiextensions-apiserver/pkg/apiserver/schema/{pruning,defaulting}:
unknown fields are dropped unless `x-kubernetes-preserve-unknown-fields` keeps them; at the root and
in embedded resources `apiVersion`, `kind` and `metadata` survive (metadata keeps only ObjectMeta
fields); a non-nullable `null` is dropped, or replaced by the default when one is declared.
"""

from __future__ import annotations

from typing import Any

from kubeemu.crdvalidation.node import MISSING, SchemaNode, child_path, index_path
from kubeemu.jsonutil import jsoncopy

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def prune(obj: Any, schema: SchemaNode, *, is_root: bool = True) -> tuple[Any, list[str]]:
    """A pruned copy of `obj` and the paths (`spec.foo`, `spec.items[0].bar`) that were removed."""
    removed: list[str] = []
    result = _prune(jsoncopy(obj), schema, "", removed, is_resource=is_root)
    return result, removed


def _prune(value: Any, schema: SchemaNode | None, path: str, removed: list[str], *, is_resource: bool) -> Any:
    if schema is None:
        return value
    if isinstance(value, dict):
        if is_resource or schema.embedded:
            _prune_metadata(value, path, removed)
        if schema.int_or_string:
            return value
        for key in list(value):
            if (is_resource or schema.embedded) and key in ("apiVersion", "kind", "metadata"):
                continue
            sub: SchemaNode | None = schema.properties.get(key)
            if sub is None:
                sub = schema.additional
            if sub is not None:
                value[key] = _prune(value[key], sub, child_path(path, key), removed, is_resource=False)
            elif not schema.preserve_unknown and not schema.additional_allowed:
                removed.append(child_path(path, key))
                del value[key]
        return value
    if isinstance(value, list) and schema.items is not None:
        return [
            _prune(item, schema.items, index_path(path, i), removed, is_resource=False)
            for i, item in enumerate(value)
        ]
    return value


def _prune_metadata(obj: dict[str, Any], path: str, removed: list[str]) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in list(meta):
            if key not in OBJECT_META_FIELDS:
                removed.append(child_path(child_path(path, "metadata"), key))
                del meta[key]


def apply_defaults(obj: Any, schema: SchemaNode) -> Any:
    """A copy of `obj` with schema defaults applied (and non-nullable nulls removed or defaulted)."""
    result = jsoncopy(obj)
    _default(result, schema)
    return result


def _default(value: Any, schema: SchemaNode | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        for key, prop in schema.properties.items():
            current = value.get(key, MISSING)
            if current is None and not prop.nullable:
                if prop.default is MISSING:
                    del value[key]
                    continue
                current = MISSING
            if current is MISSING and prop.default is not MISSING:
                value[key] = jsoncopy(prop.default)
        for key, current in list(value.items()):
            declared = schema.properties.get(key)
            if declared is not None:
                _default(current, declared)
            elif schema.additional is not None:
                if (
                    current is None
                    and not schema.additional.nullable
                    and schema.additional.default is not MISSING
                ):
                    value[key] = jsoncopy(schema.additional.default)
                _default(value[key], schema.additional)
    elif isinstance(value, list) and schema.items is not None:
        for i, item in enumerate(value):
            if item is None and not schema.items.nullable and schema.items.default is not MISSING:
                value[i] = jsoncopy(schema.items.default)
            _default(value[i], schema.items)
