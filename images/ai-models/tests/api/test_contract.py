"""The contract is a valid OpenAPI document and the pydantic models say exactly what it says.

Both sides are reduced to the facts a client relies on (properties, types, formats, enums, bounds,
patterns, required, additionalProperties; defaults of parameters) and compared for equality, so a
property, enum value or bound added, removed or changed on one side only fails here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openapi_spec_validator import validate
from pydantic import BaseModel

from ai_models.api import models
from ai_models.api.contract import contract_document, contract_json

# Keywords that carry meaning for clients; titles, descriptions and examples are prose.
_KEPT = ("type", "format", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern")

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "Entry": models.Entry,
    "DownloadVerdict": models.DownloadVerdictView,
    "SearchPage": models.SearchPage,
    "Source": models.Source,
    "SourceList": models.SourceList,
    "Problem": models.Problem,
    "Health": models.Health,
    "Readiness": models.Readiness,
}


def _resolver(root: dict[str, Any]) -> Any:
    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = root
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    return resolve


def canonical(node: dict[str, Any], *, root: dict[str, Any], keep_default: bool = False) -> dict[str, Any]:
    """The client-relevant facts of a JSON schema, references inlined."""
    node = _resolver(root)(node)
    variants = node.get("anyOf")
    if variants is not None:
        # pydantic spells an optional field `anyOf: [X, null]`; the API never sends null (absent
        # facts are left out), which the contract expresses by not requiring the property.
        concrete = [v for v in variants if v.get("type") != "null"]
        assert len(concrete) == 1, f"unexpected union {variants}"
        node = {**_resolver(root)(concrete[0]), **{k: v for k, v in node.items() if k != "anyOf"}}
    out: dict[str, Any] = {key: node[key] for key in _KEPT if key in node}
    if "enum" in out:
        out["enum"] = sorted(out["enum"])
    if keep_default and node.get("default") is not None:
        out["default"] = node["default"]
    if node.get("type") == "object" or "properties" in node:
        out["properties"] = {
            name: canonical(value, root=root, keep_default=keep_default)
            for name, value in node.get("properties", {}).items()
        }
        out["required"] = sorted(node.get("required", []))
        out["additionalProperties"] = node.get("additionalProperties", True)
    if "items" in node:
        out["items"] = canonical(node["items"], root=root, keep_default=keep_default)
    return out


def model_schema(model: type[BaseModel], *, parameters: bool = False) -> dict[str, Any]:
    """Parameters are validated on the way in (with defaults); responses are serialized on the way out."""
    schema = model.model_json_schema(by_alias=True, mode="validation" if parameters else "serialization")
    return canonical(schema, root=schema, keep_default=parameters)


def contract_schema(name: str) -> dict[str, Any]:
    document = contract_document()
    return canonical(document["components"]["schemas"][name], root=document)


def operation(path: str) -> dict[str, Any]:
    get: dict[str, Any] = contract_document()["paths"][path]["get"]
    return get


def parameters_as_object(params: list[dict[str, Any]]) -> dict[str, Any]:
    document = contract_document()
    properties = {p["name"]: canonical(p["schema"], root=document, keep_default=True) for p in params}
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(p["name"] for p in params if p.get("required")),
        # An operation's parameters are a closed set: the api refuses unknown ones.
        "additionalProperties": False,
    }


def test_contract_is_a_valid_openapi_document() -> None:
    validate(contract_document())


def test_served_document_is_the_contract() -> None:
    assert json.loads(contract_json()) == contract_document()


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_response_schema_equals_its_model(name: str) -> None:
    assert model_schema(SCHEMA_MODELS[name]) == contract_schema(name)


def test_every_response_schema_has_a_model() -> None:
    document = contract_document()
    object_schemas = {
        name
        for name, schema in document["components"]["schemas"].items()
        if schema.get("type") == "object" and name not in {"EntryMetadata", "EntryResources"}
    }
    assert object_schemas == set(SCHEMA_MODELS)


def test_entry_metadata_and_resources_are_the_stored_record_models() -> None:
    entry = contract_schema("Entry")
    assert entry["properties"]["metadata"] == contract_schema("EntryMetadata")
    assert entry["properties"]["resources"] == contract_schema("EntryResources")


def test_search_parameters_equal_the_query_model() -> None:
    params = operation(models.SEARCH_PATH)["parameters"]
    assert all(p["in"] == "query" for p in params)
    assert parameters_as_object(params) == model_schema(models.SearchQuery, parameters=True)


def test_entry_path_parameters_equal_the_locator_model() -> None:
    params = operation(models.ENTRY_PATH)["parameters"]
    assert all(p["in"] == "path" for p in params)
    assert parameters_as_object(params) == model_schema(models.EntryLocator, parameters=True)


def test_problem_types_are_the_contract_enum() -> None:
    assert contract_schema("Problem")["properties"]["type"]["enum"] == sorted(models.ProblemType)


def test_every_operation_is_in_the_contract() -> None:
    paths = contract_document()["paths"]
    assert set(paths) == {
        models.SEARCH_PATH,
        models.SOURCES_PATH,
        models.ENTRY_PATH,
        models.CONTRACT_PATH,
        models.HEALTH_PATH,
        models.READY_PATH,
    }
    assert all(set(item) == {"get"} for item in paths.values())


def test_catalog_operations_describe_auth_and_upstream_failures() -> None:
    for path in (models.SEARCH_PATH, models.SOURCES_PATH, models.ENTRY_PATH):
        responses = operation(path)["responses"]
        assert {"200", "401", "403", "502", "503"} <= set(responses), path
        assert "security" not in operation(path), f"{path} must use the document's bearer security"
