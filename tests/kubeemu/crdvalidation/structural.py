"""The apiserver's acceptance checks on a CRD version's openAPIV3Schema: structural-schema rules
(k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation and .../schema) in their message shape.

Each check returns strings like `spec.versions[0].schema.openAPIV3Schema.properties[spec].type:
Required value: must not be empty for specified object fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeemu.crdvalidation.node import SchemaNode

_UNSUPPORTED_KEYWORDS = (
    "$ref",
    "$schema",
    "additionalItems",
    "definitions",
    "dependencies",
    "patternProperties",
    "id",
)
# Keys a value validation (inside allOf/anyOf/oneOf/not) may not carry: they belong to the structure.
_STRUCTURE_ONLY = (
    "type",
    "default",
    "nullable",
    "additionalProperties",
    "description",
    "title",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
)
_SCALARS = ("string", "integer", "number", "boolean")


def structural_errors(root: SchemaNode) -> list[str]:
    errors: list[str] = []
    if root.type != "object":
        errors.append(f"{root.schema_path}.type: Required value: must be object at the root")
    if "default" in root.raw:
        errors.append(f"{root.schema_path}.default: Forbidden: must not be set at the root")
    _check_root_fields(root, errors)
    _check_node(root, errors, in_value_validation=False, is_root=True)
    return errors


def _check_root_fields(root: SchemaNode, errors: list[str]) -> None:
    for name, kind in (("apiVersion", "string"), ("kind", "string"), ("metadata", "object")):
        prop = root.properties.get(name)
        if prop is not None and prop.type and prop.type != kind:
            errors.append(f"{prop.schema_path}.type: Invalid value: {prop.type!r}: must be {kind}")
    metadata = root.properties.get("metadata")
    if metadata is None:
        return
    allowed = {"type", "properties", "description"}
    extra = sorted(set(metadata.raw) - allowed)
    if extra or set(metadata.properties) - {"name", "generateName"}:
        errors.append(
            f"{metadata.schema_path}: Forbidden: must not specify anything other than name and generateName, "
            "but metadata is implicitly specified"
        )
    for prop in metadata.properties.values():
        if prop.type and prop.type != "string":
            errors.append(f"{prop.schema_path}.type: Invalid value: {prop.type!r}: must be string")


def _check_node(
    node: SchemaNode, errors: list[str], *, in_value_validation: bool, is_root: bool = False
) -> None:
    raw = node.raw
    path = node.schema_path
    for keyword in _UNSUPPORTED_KEYWORDS:
        if keyword in raw:
            errors.append(f"{path}.{keyword}: Forbidden: {keyword} is not supported")
    if raw.get("uniqueItems") is True:
        errors.append(
            f"{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity "
            "becomes quadratic"
        )
    if isinstance(raw.get("items"), list):
        errors.append(f"{path}.items: Forbidden: items must be a schema object and not an array")
    if "properties" in raw and "additionalProperties" in raw:
        errors.append(
            f"{path}.additionalProperties: Forbidden: "
            "additionalProperties and properties are mutual exclusive"
        )
    if raw.get("additionalProperties") is False:
        errors.append(f"{path}.additionalProperties: Forbidden: additionalProperties cannot be set to false")
    if (
        "x-kubernetes-preserve-unknown-fields" in raw
        and raw["x-kubernetes-preserve-unknown-fields"] is not True
    ):
        errors.append(
            f"{path}.x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
        )
    if node.pattern_error:
        errors.append(
            f"{path}.pattern: Invalid value: {raw.get('pattern')!r}: must be a valid regular expression, "
            f"but isn't: {node.pattern_error}"
        )
    if in_value_validation:
        for key in _STRUCTURE_ONLY:
            if key in raw:
                errors.append(f"{path}.{key}: Forbidden: must not be specified in a nested context")
    else:
        _check_structure(node, errors, is_root=is_root)
    _check_value_validations(node, errors)
    for name, prop in node.properties.items():
        if not in_value_validation and not prop.type and not prop.int_or_string and not prop.preserve_unknown:
            errors.append(
                f"{prop.schema_path}.type: Required value: must not be empty for specified object fields"
            )
        _check_node(prop, errors, in_value_validation=in_value_validation)
        del name
    if node.items is not None:
        items = node.items
        if (
            not in_value_validation
            and not items.type
            and not items.int_or_string
            and not items.preserve_unknown
        ):
            errors.append(
                f"{items.schema_path}.type: Required value: must not be empty for specified array items"
            )
        _check_node(items, errors, in_value_validation=in_value_validation)
    if node.additional is not None:
        extra = node.additional
        if (
            not in_value_validation
            and not extra.type
            and not extra.int_or_string
            and not extra.preserve_unknown
        ):
            errors.append(
                f"{extra.schema_path}.type: Required value: must not be empty for specified object fields"
            )
        _check_node(extra, errors, in_value_validation=in_value_validation)


def _check_structure(node: SchemaNode, errors: list[str], *, is_root: bool) -> None:
    path = node.schema_path
    if node.int_or_string and node.type:
        errors.append(
            f"{path}.type: Invalid value: {node.type!r}: must be empty if x-kubernetes-int-or-string is true"
        )
    if node.embedded and node.type != "object":
        errors.append(
            f"{path}.type: Required value: must be object if x-kubernetes-embedded-resource is true"
        )
    if node.type == "array" and node.items is None:
        errors.append(f"{path}.items: Required value: must be specified")
    if node.list_map_keys and node.list_type != "map":
        errors.append(
            f"{path}.x-kubernetes-list-type: Invalid value: {node.list_type!r}: "
            "must be map if x-kubernetes-list-map-keys is non-empty"
        )
    if node.list_type is not None:
        if node.list_type not in ("atomic", "set", "map"):
            errors.append(
                f"{path}.x-kubernetes-list-type: Unsupported value: {node.list_type!r}: "
                'supported values: "atomic", "set", "map"'
            )
        if node.type != "array":
            errors.append(
                f"{path}.type: Invalid value: {node.type!r}: must be array if x-kubernetes-list-type is set"
            )
        elif (
            node.list_type == "set"
            and node.items is not None
            and node.items.type not in _SCALARS
            and node.items.map_type != "atomic"
        ):
            errors.append(
                f"{path}.items.x-kubernetes-map-type: Invalid value: null: "
                "must be atomic as item of a list with x-kubernetes-list-type=set"
            )
        elif node.list_type == "map":
            _check_list_map(node, errors)
    if node.map_type is not None and node.map_type not in ("granular", "atomic"):
        errors.append(
            f"{path}.x-kubernetes-map-type: Unsupported value: {node.map_type!r}: "
            'supported values: "granular", "atomic"'
        )
    del is_root


def _check_list_map(node: SchemaNode, errors: list[str]) -> None:
    path = node.schema_path
    items = node.items
    if not node.list_map_keys:
        errors.append(
            f"{path}.x-kubernetes-list-map-keys: Required value: "
            "must not be empty if x-kubernetes-list-type is map"
        )
    if items is None or items.type != "object":
        errors.append(
            f"{path}.items.type: Invalid value: {items.type if items else ''!r}: "
            "must be object if parent array's x-kubernetes-list-type is map"
        )
        return
    for key in node.list_map_keys:
        prop = items.properties.get(key)
        if prop is None:
            errors.append(
                f"{path}.x-kubernetes-list-map-keys: Invalid value: {key!r}: "
                "entries must all be names of item properties"
            )
            continue
        if prop.type not in _SCALARS:
            errors.append(
                f"{path}.items.properties[{key}].type: Invalid value: {prop.type!r}: "
                "must be a scalar type if parent array's x-kubernetes-list-type is map"
            )
        if key not in items.required and "default" not in prop.raw and not prop.nullable:
            errors.append(
                f"{path}.items.properties[{key}]: Required value: "
                "this property is in x-kubernetes-list-map-keys, "
                "so it must have a default or be a required property"
            )


def _check_value_validations(node: SchemaNode, errors: list[str]) -> None:
    for sub in node.all_of + node.any_of + node.one_of + ([node.not_] if node.not_ else []):
        if node.int_or_string and _is_int_or_string_pattern(sub):
            continue
        _check_node(sub, errors, in_value_validation=True)
        for name in sub.properties:
            if name not in node.properties and not node.preserve_unknown and node.additional is None:
                errors.append(
                    f"{sub.schema_path}.properties[{name}]: Forbidden: must be specified in the "
                    "structural part of the schema as well"
                )
        if sub.items is not None and node.items is None:
            errors.append(
                f"{sub.schema_path}.items: Forbidden: must be specified in the structural part as well"
            )


def _is_int_or_string_pattern(sub: SchemaNode) -> bool:
    raw: Mapping[str, Any] = sub.raw
    return set(raw) <= {"type"} and raw.get("type") in ("integer", "string")
