"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge follows k8s.io/apimachinery/pkg/util/strategicpatch for the directives kubectl
and client-go send (`$patch: replace|delete|merge`, `$retainKeys`, `$setElementOrder/<list>`,
`$deleteFromPrimitiveList/<list>`), with list merge keys and strategies read from the built-in
OpenAPI definitions (`x-kubernetes-patch-merge-key`/`-strategy`). One approximation: server-only
list items are kept after the items `$setElementOrder` names, instead of interleaved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonpatch

from kubeemu import errors
from kubeemu.jsonutil import jsoncopy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH_YAML = "application/apply-patch+yaml"
CUSTOM_RESOURCE_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH_YAML)
BUILTIN_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return jsoncopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    if not isinstance(operations, list):
        raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        patch = jsonpatch.JsonPatch(operations)
        result: Any = patch.apply(target)
    except jsonpatch.InvalidJsonPatch as exc:
        raise errors.bad_request(str(exc)) from exc
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        # The apiserver answers a failing op (a failed `test`, a missing path) with a generic 422.
        raise errors.APIError(
            code=422,
            reason="Invalid",
            message="the server rejected our request due to an error in our request",
            causes=(errors.Cause(reason="UnexpectedServerResponse", message=str(exc)),),
        ) from exc
    if not isinstance(result, dict):
        raise errors.bad_request("json patch result is not an object")
    return result


# Given the schema node of a map, returns (schema of field, merge key, strategy) for a field.
FieldMeta = Callable[[Any, str], tuple[Any, str | None, str]]

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def strategic_merge_patch(
    target: dict[str, Any], patch: Any, *, schema: Any, field_meta: FieldMeta
) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise errors.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    return _merge_map(target, patch, schema, field_meta)


def _merge_map(original: Any, patch: dict[str, Any], schema: Any, field_meta: FieldMeta) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        replaced: dict[str, Any] = _strip_directives(
            {k: v for k, v in patch.items() if k != _DIRECTIVE}, schema, field_meta
        )
        return replaced
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise errors.bad_request(f"Unknown patch type: {directive}")
    result: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    retain = patch.get(_RETAIN_KEYS)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS):
            continue
        if key.startswith(_SET_ORDER):
            orders[key[len(_SET_ORDER) :]] = value if isinstance(value, list) else []
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE) :]
            doomed = value if isinstance(value, list) else []
            if isinstance(result.get(name), list):
                result[name] = [v for v in result[name] if v not in doomed]
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub_schema, merge_key, strategy = field_meta(schema, key)
        current = result.get(key)
        if isinstance(value, dict) and "replace" not in strategy:
            result[key] = _merge_map(
                current if isinstance(current, dict) else {}, value, sub_schema, field_meta
            )
        elif isinstance(value, list) and "merge" in strategy:
            result[key] = _merge_list(
                current if isinstance(current, list) else [], value, sub_schema, merge_key, field_meta
            )
        elif isinstance(value, list):
            result[key] = [_strip_directives(v, _items(sub_schema, field_meta), field_meta) for v in value]
        else:
            result[key] = jsoncopy(value)
    for name, order in orders.items():
        if isinstance(result.get(name), list):
            _, merge_key, _ = field_meta(schema, name)
            result[name] = _apply_order(result[name], order, merge_key)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _items(schema: Any, field_meta: FieldMeta) -> Any:
    items, _, _ = field_meta(schema, "[]")
    return items


def _merge_list(
    original: list[Any], patch: list[Any], schema: Any, merge_key: str | None, field_meta: FieldMeta
) -> list[Any]:
    item_schema = _items(schema, field_meta)
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        return [
            _strip_directives(p, item_schema, field_meta)
            for p in patch
            if not (isinstance(p, dict) and p.get(_DIRECTIVE) == "replace")
        ]
    if merge_key is None:
        merged = list(original)
        for value in patch:
            if value not in merged:
                merged.append(jsoncopy(value))
        return merged
    merged = [jsoncopy(item) for item in original]
    for item in patch:
        if not isinstance(item, dict):
            raise errors.bad_request(f"merging an object in json but data type is not map: {item!r}")
        key_value = item.get(merge_key)
        position = next(
            (i for i, o in enumerate(merged) if isinstance(o, dict) and o.get(merge_key) == key_value), None
        )
        if item.get(_DIRECTIVE) == "delete":
            if position is not None:
                merged.pop(position)
            continue
        if position is None:
            merged.append(_strip_directives(item, item_schema, field_meta))
        else:
            merged[position] = _merge_map(merged[position], item, item_schema, field_meta)
    return merged


def _apply_order(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def identity(value: Any) -> Any:
        return value.get(merge_key) if merge_key and isinstance(value, dict) else value

    wanted = [identity(o) for o in order]
    ranked = [item for w in wanted for item in items if identity(item) == w]
    rest = [item for item in items if identity(item) not in wanted]
    return ranked + rest


def _strip_directives(value: Any, schema: Any, field_meta: FieldMeta) -> Any:
    """A patch fragment that lands where nothing existed: apply its directives against emptiness."""
    if isinstance(value, dict):
        return _merge_map({}, value, schema, field_meta)
    if isinstance(value, list):
        return [_strip_directives(v, _items(schema, field_meta), field_meta) for v in value]
    return value
