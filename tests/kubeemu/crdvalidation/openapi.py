"""OpenAPI value validation of custom resources, with kube-openapi's checks and message texts
(`spec.replicas in body should be greater than or equal to 1`), converted to field errors the
way the apiserver converts them, plus `x-kubernetes-list-type` set/map uniqueness.

Updates are ratcheted (CRDValidationRatcheting, GA in 1.33): a value deeply equal to its
correlated old value is not re-validated, so tightening a schema does not block unrelated edits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubeemu.crdvalidation.errors import FieldError
from kubeemu.crdvalidation.formats import check_format
from kubeemu.crdvalidation.node import MISSING, SchemaNode, child_path, index_path


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality (1 == 1.0, but true != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _type_ok(schema: SchemaNode, value: Any) -> bool:
    actual = json_type(value)
    if schema.int_or_string:
        return actual in ("integer", "string") or (actual == "number" and float(value).is_integer())
    expected = schema.type
    if not expected or expected == actual:
        return True
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return expected == "number" and actual == "integer"


def error_path(path: str) -> str:
    return path or "<nil>"


def validate_value(schema: SchemaNode, value: Any, path: str = "", *, old: Any = MISSING) -> list[FieldError]:
    """Validate `value` against `schema`. `old` is the correlated previous value on updates."""
    if old is not MISSING and json_equal(value, old):
        return []
    errors: list[FieldError] = []
    where = error_path(path)
    if value is None:
        if not schema.nullable and (schema.type or schema.int_or_string):
            expected = "integer,string" if schema.int_or_string else schema.type
            errors.append(
                FieldError(
                    where, "TypeInvalid", f'{path} in body must be of type {expected}: "null"', value="null"
                )
            )
        return errors
    if not _type_ok(schema, value):
        expected = "integer,string" if schema.int_or_string else schema.type
        actual = json_type(value)
        errors.append(
            FieldError(
                where, "TypeInvalid", f'{path} in body must be of type {expected}: "{actual}"', value=actual
            )
        )
        return errors
    if isinstance(value, dict):
        errors.extend(_validate_object(schema, value, path, old))
    elif isinstance(value, list):
        errors.extend(_validate_array(schema, value, path, old))
    elif isinstance(value, str):
        errors.extend(_validate_string(schema, value, path))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        errors.extend(_validate_number(schema, value, path))
    if schema.enum is not None and not any(json_equal(value, allowed) for allowed in schema.enum):
        supported = ", ".join(
            json.dumps(v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))) for v in schema.enum
        )
        errors.append(FieldError(where, "NotSupported", f"supported values: {supported}", value=value))
    errors.extend(_validate_junctors(schema, value, path))
    return errors


def _validate_object(schema: SchemaNode, value: Mapping[str, Any], path: str, old: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    old_map = old if isinstance(old, Mapping) else {}
    for name in schema.required:
        if name not in value:
            errors.append(FieldError(error_path(child_path(path, name)), "Required"))
    count = len(value)
    raw = schema.raw
    if isinstance(raw.get("maxProperties"), int) and count > raw["maxProperties"]:
        errors.append(
            FieldError(
                error_path(path),
                "TooMany",
                f"must have at most {raw['maxProperties']} items",
                value=raw["maxProperties"],
            )
        )
    if isinstance(raw.get("minProperties"), int) and count < raw["minProperties"]:
        errors.append(
            FieldError(
                error_path(path),
                "Invalid",
                f"{path} in body should have at least {raw['minProperties']} properties",
                value=raw["minProperties"],
            )
        )
    for key, sub_value in value.items():
        sub = schema.properties.get(key) or schema.additional
        if sub is None:
            continue
        # kube-openapi names map entries with dots too (`spec.labels.key`), unlike CEL errors.
        errors.extend(validate_value(sub, sub_value, child_path(path, key), old=old_map.get(key, MISSING)))
    return errors


def _correlated_items(schema: SchemaNode, value: list[Any], old: Any) -> list[Any]:
    """The old item each new item correlates with (MISSING if none): only list-type=map correlates."""
    if schema.list_type != "map" or not isinstance(old, list) or not schema.list_map_keys:
        return [MISSING] * len(value)
    by_key: dict[str, Any] = {}
    for item in old:
        if isinstance(item, dict):
            by_key[json.dumps([item.get(k) for k in schema.list_map_keys])] = item
    return [
        by_key.get(json.dumps([item.get(k) for k in schema.list_map_keys]), MISSING)
        if isinstance(item, dict)
        else MISSING
        for item in value
    ]


def _validate_array(schema: SchemaNode, value: list[Any], path: str, old: Any) -> list[FieldError]:
    errors: list[FieldError] = []
    raw = schema.raw
    if isinstance(raw.get("maxItems"), int) and len(value) > raw["maxItems"]:
        errors.append(
            FieldError(
                error_path(path), "TooMany", f"must have at most {raw['maxItems']} items", value=len(value)
            )
        )
    if isinstance(raw.get("minItems"), int) and len(value) < raw["minItems"]:
        errors.append(
            FieldError(
                error_path(path),
                "Invalid",
                f"{path} in body should have at least {raw['minItems']} items",
                value=len(value),
            )
        )
    if schema.items is not None:
        olds = _correlated_items(schema, value, old)
        for i, (item, old_item) in enumerate(zip(value, olds, strict=True)):
            errors.extend(validate_value(schema.items, item, index_path(path, i), old=old_item))
    errors.extend(list_uniqueness_errors(schema, value, path))
    return errors


def list_uniqueness_errors(schema: SchemaNode, value: list[Any], path: str) -> list[FieldError]:
    """`x-kubernetes-list-type: set|map` invariants (structurallisttype.ValidateListSetsAndMaps)."""
    errors: list[FieldError] = []
    seen: list[Any] = []
    for i, item in enumerate(value):
        if schema.list_type == "set":
            identity = item
        elif schema.list_type == "map" and isinstance(item, dict):
            identity = {k: item[k] for k in schema.list_map_keys if k in item}
        else:
            continue
        if any(json_equal(identity, s) for s in seen):
            errors.append(FieldError(index_path(path, i), "Duplicate", value=identity))
        else:
            seen.append(identity)
    return errors


def _validate_string(schema: SchemaNode, value: str, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    raw = schema.raw
    where = error_path(path)
    if isinstance(raw.get("maxLength"), int) and len(value) > raw["maxLength"]:
        unit = "byte" if raw["maxLength"] == 1 else "bytes"
        errors.append(FieldError(where, "TooLong", f"may not be more than {raw['maxLength']} {unit}"))
    if isinstance(raw.get("minLength"), int) and len(value) < raw["minLength"]:
        errors.append(
            FieldError(
                where,
                "Invalid",
                f"{path} in body should be at least {raw['minLength']} chars long",
                value=value,
            )
        )
    if schema.pattern is not None and not schema.pattern.search(value):
        errors.append(
            FieldError(where, "Invalid", f"{path} in body should match '{raw['pattern']}'", value=value)
        )
    if schema.format and not check_format(schema.format, value):
        errors.append(
            FieldError(
                where,
                "TypeInvalid",
                f'{path} in body must be of type {schema.format}: "{value}"',
                value=value,
            )
        )
    return errors


def _validate_number(schema: SchemaNode, value: float, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    raw = schema.raw
    where = error_path(path)
    maximum, minimum = raw.get("maximum"), raw.get("minimum")
    if isinstance(maximum, (int, float)):
        exclusive = raw.get("exclusiveMaximum") is True
        if value > maximum or (exclusive and value == maximum):
            op = "less than" if exclusive else "less than or equal to"
            errors.append(
                FieldError(where, "Invalid", f"{path} in body should be {op} {_num(maximum)}", value=value)
            )
    if isinstance(minimum, (int, float)):
        exclusive = raw.get("exclusiveMinimum") is True
        if value < minimum or (exclusive and value == minimum):
            op = "greater than" if exclusive else "greater than or equal to"
            errors.append(
                FieldError(where, "Invalid", f"{path} in body should be {op} {_num(minimum)}", value=value)
            )
    multiple = raw.get("multipleOf")
    if isinstance(multiple, (int, float)) and multiple > 0 and (value / multiple) % 1 != 0:
        errors.append(
            FieldError(
                where, "Invalid", f"{path} in body should be a multiple of {_num(multiple)}", value=value
            )
        )
    return errors


def _validate_junctors(schema: SchemaNode, value: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    where = error_path(path)
    for sub in schema.all_of:
        errors.extend(validate_value(sub, value, path))
    if schema.any_of and not schema.int_or_string:
        results = [validate_value(sub, value, path) for sub in schema.any_of]
        if all(results):
            errors.append(FieldError(where, "Invalid", "must validate at least one schema (anyOf)", value=""))
            for result in results:
                errors.extend(result)
    if schema.one_of:
        results = [validate_value(sub, value, path) for sub in schema.one_of]
        valid = sum(1 for r in results if not r)
        if valid != 1:
            detail = "must validate one and only one schema (oneOf)"
            if valid == 0:
                detail += ". Found none valid"
            errors.append(FieldError(where, "Invalid", detail, value=""))
            if valid == 0:
                for result in results:
                    errors.extend(result)
    if schema.not_ is not None and not validate_value(schema.not_, value, path):
        errors.append(FieldError(where, "Invalid", "must not validate the schema (not)", value=""))
    return errors
