"""The contracts are valid OpenAPI documents and the pydantic models say exactly what they say.

Both sides are reduced to the facts a client relies on (properties, types, formats, enums, bounds,
patterns, required, additionalProperties; defaults of parameters) and compared for equality, so a
property, enum value or bound added, removed or changed on one side only fails here. The apps'
routes are compared with the documents' operations the same way, per listener.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pytest
import yaml
from fastapi import APIRouter
from fastapi.routing import APIRoute
from openapi_spec_validator import validate
from pydantic import BaseModel

from ai_models.api import models, models_lookup, models_serving, routes_service
from ai_models.api.catalog import routes as routes_catalog
from ai_models.api.contract import Contract, contract_document, contract_json, query_parameters
from ai_models.api.lookup import routes as routes_lookup
from ai_models.api.serving import routes as routes_serving
from ai_models.api.upload import models as models_upload
from ai_models.api.upload import routes as routes_upload
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.artifacts.sniff import safe_member_path
from ai_models.domain.catalog.record import ResourceFacts
from ai_models.domain.publication.upload_token import issue
from ai_models.domain.storage.ledger import Owner
from ai_models.names import SourceType
from support.paths import CRDS_DIR

# Keywords that carry meaning for clients; titles, descriptions and examples are prose.
_KEPT = ("type", "format", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern")

SCHEMA_MODELS: dict[Contract, dict[str, type[BaseModel]]] = {
    Contract.CATALOG_IMPORT: {
        "Entry": models.Entry,
        "DownloadVerdict": models.DownloadVerdictView,
        "SearchPage": models.SearchPage,
        "Source": models.Source,
        "SourceList": models.SourceList,
        "StorageSummary": models.StorageSummary,
        "ScopeUsage": models.ScopeUsageView,
        "Problem": models.Problem,
        "Health": models.Health,
        "Readiness": models.Readiness,
    },
    Contract.UPLOAD: {
        "UploadReceipt": models_upload.UploadReceipt,
        "Problem": models.Problem,
    },
    Contract.SERVING: {
        "ArtifactManifest": models_serving.ArtifactManifestView,
        "ArtifactOwner": models_serving.ArtifactOwnerView,
        "ArtifactSource": models_serving.ArtifactSourceView,
        "ArtifactFile": models_serving.ArtifactFileView,
        "ClusterModelPage": models_serving.ClusterModelPage,
        "ServedClusterModel": models_serving.ServedClusterModel,
        "ResolvedProfile": models_lookup.ResolvedProfile,
        "ResourceFacts": ResourceFacts,
        "Problem": models.Problem,
    },
    Contract.INTERNAL_LOOKUP: {
        "ModelLookup": models_lookup.ModelLookup,
        "Artifact": models_lookup.ArtifactView,
        "ResolvedProfile": models_lookup.ResolvedProfile,
        "ResourceFacts": ResourceFacts,
        "Condition": models_lookup.ConditionView,
        "Delivery": models_lookup.Delivery,
        "Problem": models.Problem,
    },
}
# Object schemas that are the same shape as another one's property (checked through it).
NESTED_ONLY = {Contract.CATALOG_IMPORT: {"EntryMetadata", "EntryResources"}}
# Which routers each listener serves, and so which documents' operations it must route.
PUBLIC_ROUTERS = (
    routes_catalog.router,
    routes_upload.router,
    routes_serving.router,
    routes_service.serving_contract,
    routes_service.router,
)
PUBLIC_CONTRACTS = (Contract.CATALOG_IMPORT, Contract.UPLOAD, Contract.SERVING)
SECURED_EXPECTED = {"401", "403", "502", "503"}
ALL = list(Contract)


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
    if "const" in node:
        # pydantic spells a one-value Literal `const`; the contract, a one-value enum.
        node = {**{k: v for k, v in node.items() if k != "const"}, "enum": [node["const"]]}
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


def contract_schema(name: str, contract: Contract = Contract.CATALOG_IMPORT) -> dict[str, Any]:
    document = contract_document(contract)
    return canonical(document["components"]["schemas"][name], root=document)


def operation(path: str, contract: Contract = Contract.CATALOG_IMPORT, method: str = "get") -> dict[str, Any]:
    found: dict[str, Any] = contract_document(contract)["paths"][path][method]
    return found


def operation_parameters(path: str, contract: Contract, method: str = "get") -> list[dict[str, Any]]:
    document = contract_document(contract)
    item = document["paths"][path]
    resolve = _resolver(document)
    return [resolve(p) for p in [*item.get("parameters", []), *item[method].get("parameters", [])]]


def parameters_as_object(
    params: list[dict[str, Any]], contract: Contract = Contract.CATALOG_IMPORT
) -> dict[str, Any]:
    document = contract_document(contract)
    properties = {p["name"]: canonical(p["schema"], root=document, keep_default=True) for p in params}
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(p["name"] for p in params if p.get("required")),
        # An operation's parameters are a closed set: the api refuses unknown ones.
        "additionalProperties": False,
    }


def routed(routers: tuple[APIRouter, ...]) -> set[tuple[str, str]]:
    return {
        (route.path_format, method)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }


def operations(contracts: tuple[Contract, ...]) -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for contract in contracts
        for path, item in contract_document(contract)["paths"].items()
        for method in item
        if method in {"get", "head", "put", "post", "delete", "patch"}
    }


@pytest.mark.parametrize("contract", ALL)
def test_contract_is_a_valid_openapi_document(contract: Contract) -> None:
    validate(contract_document(contract))


@pytest.mark.parametrize("contract", ALL)
def test_served_document_is_the_contract(contract: Contract) -> None:
    assert json.loads(contract_json(contract)) == contract_document(contract)


@pytest.mark.parametrize(
    ("contract", "name"),
    [(contract, name) for contract, schemas in SCHEMA_MODELS.items() for name in sorted(schemas)],
)
def test_response_schema_equals_its_model(contract: Contract, name: str) -> None:
    assert model_schema(SCHEMA_MODELS[contract][name]) == contract_schema(name, contract)


@pytest.mark.parametrize("contract", ALL)
def test_every_response_schema_has_a_model(contract: Contract) -> None:
    document = contract_document(contract)
    object_schemas = {
        name
        for name, schema in document["components"]["schemas"].items()
        if schema.get("type") == "object" and name not in NESTED_ONLY.get(contract, set())
    }
    assert object_schemas == set(SCHEMA_MODELS[contract])


def test_entry_metadata_and_resources_are_the_stored_record_models() -> None:
    entry = contract_schema("Entry")
    assert entry["properties"]["metadata"] == contract_schema("EntryMetadata")
    assert entry["properties"]["resources"] == contract_schema("EntryResources")
    assert contract_schema("EntryResources") == contract_schema("ResourceFacts", Contract.INTERNAL_LOOKUP)


def test_search_parameters_equal_the_query_model() -> None:
    params = operation(models.SEARCH_PATH)["parameters"]
    assert all(p["in"] == "query" for p in params)
    assert parameters_as_object(params) == model_schema(models.SearchQuery, parameters=True)


def test_entry_path_parameters_equal_the_locator_model() -> None:
    params = operation(models.ENTRY_PATH)["parameters"]
    assert all(p["in"] == "path" for p in params)
    assert parameters_as_object(params) == model_schema(models.EntryLocator, parameters=True)


@pytest.mark.parametrize(
    ("path", "locator"),
    [
        (models_serving.MODEL_MANIFEST_PATH, models_serving.ModelManifestLocator),
        (models_serving.MODEL_FILE_PATH, models_serving.ModelFileLocator),
        (models_serving.CLUSTER_MODEL_MANIFEST_PATH, models_serving.ClusterModelManifestLocator),
        (models_serving.CLUSTER_MODEL_FILE_PATH, models_serving.ClusterModelFileLocator),
    ],
)
@pytest.mark.parametrize("method", ["get", "head"])
def test_serving_path_parameters_equal_the_locator_models(
    path: str, locator: type[BaseModel], method: str
) -> None:
    params = [p for p in operation_parameters(path, Contract.SERVING, method) if p["in"] == "path"]
    assert parameters_as_object(params, Contract.SERVING) == model_schema(locator, parameters=True)


def test_cluster_model_listing_parameters_equal_the_query_model() -> None:
    params = operation_parameters(models_serving.CLUSTER_MODELS_PATH, Contract.SERVING)
    assert all(p["in"] == "query" for p in params)
    assert parameters_as_object(params, Contract.SERVING) == model_schema(
        models_serving.ClusterModelListQuery, parameters=True
    )


def test_the_serving_listing_shows_the_facts_of_a_catalog_entry() -> None:
    """What the listing serves is what an `AIModels` source stores as an entry's resources."""
    served = contract_schema("ResourceFacts", Contract.SERVING)
    assert served == contract_schema("EntryResources")
    assert contract_schema("ResolvedProfile", Contract.SERVING) == contract_schema(
        "ResolvedProfile", Contract.INTERNAL_LOOKUP
    )


def test_lookup_parameters_equal_the_query_model() -> None:
    params = operation_parameters(models_lookup.LOOKUP_PATH, Contract.INTERNAL_LOOKUP)
    assert all(p["in"] == "query" for p in params)
    assert parameters_as_object(params, Contract.INTERNAL_LOOKUP) == model_schema(
        models_lookup.LookupQuery, parameters=True
    )


def test_issued_upload_tokens_match_the_token_schema() -> None:
    schema = contract_document(Contract.UPLOAD)["components"]["schemas"]["UploadToken"]
    for owner in (Owner("Model", "team-a", "llama", "u-1"), Owner("ClusterModel", "", "x" * 253, "u" * 36)):
        token = issue(owner, expires_at=datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC), key=b"k" * 32)
        assert re.fullmatch(schema["pattern"].strip("^$"), token)
        assert schema["minLength"] <= len(token) <= schema["maxLength"]


@pytest.mark.parametrize(
    "member",
    ["model.gguf", "./a/b.json", "a//b/c.txt", "dir/.git/config", "../x", "/abs", "tok enizer", "x" * 201],
)
def test_servable_file_paths_are_the_paths_artifacts_hold(member: str) -> None:
    pattern = contract_document(Contract.SERVING)["components"]["parameters"]["FilePath"]["schema"]["pattern"]
    assert pattern == models_serving.FILE_PATH_PATTERN
    stored = safe_member_path(member)
    if stored is not None:
        assert re.fullmatch(pattern, stored)
    assert (re.fullmatch(pattern, member) is not None) == (stored == member)


def test_the_stored_manifest_is_what_the_contract_describes() -> None:
    manifest = ArtifactManifest(
        owner=Owner("ClusterModel", "", "llama", "u-1"),
        digest="sha256:" + "a" * 64,
        source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256="b" * 64),
        files=(ArtifactFile(path="model.gguf", size=10, sha256="c" * 64, etag="e-1"),),
        resolved={"format": "GGUF"},
        published_at="2026-02-01T12:00:00Z",
    )
    view = models_serving.ArtifactManifestView.model_validate_json(manifest_to_json(manifest))
    assert view.owner.name == "llama"
    assert view.files[0].store_version == "e-1"


@pytest.mark.parametrize("contract", ALL)
def test_every_document_has_the_one_problem_shape(contract: Contract) -> None:
    assert contract_schema("Problem", contract) == model_schema(models.Problem)
    assert contract_schema("Problem", contract)["properties"]["type"]["enum"] == sorted(models.ProblemType)


def test_the_public_listener_routes_exactly_the_public_operations() -> None:
    assert routed(PUBLIC_ROUTERS) == operations(PUBLIC_CONTRACTS)
    assert not any(path.startswith("/api/internal/") for path, _ in routed(PUBLIC_ROUTERS))


def test_the_internal_listener_routes_exactly_the_lookup_and_serving_operations() -> None:
    internal = (routes_lookup.router, routes_serving.router, routes_service.serving_contract)
    assert routed(internal) == operations((Contract.INTERNAL_LOOKUP, Contract.SERVING))


def test_query_parameters_are_read_from_every_document() -> None:
    declared = query_parameters()
    assert declared[(models.SEARCH_PATH, "GET")] >= {"q", "pageToken"}
    assert declared[(models_upload.UPLOAD_PATH, "PUT")] == {"filename"}
    assert declared[(models_lookup.LOOKUP_PATH, "GET")] == {"kind", "namespace", "name"}
    assert declared[(models_serving.MODEL_FILE_PATH, "HEAD")] == frozenset()


def test_paths_are_the_contract_constants() -> None:
    assert set(contract_document(Contract.CATALOG_IMPORT)["paths"]) == {
        models.SEARCH_PATH,
        models.SOURCES_PATH,
        models.ENTRY_PATH,
        models.STORAGE_SUMMARY_PATH,
        models.CONTRACT_PATH,
        models.LEGACY_CONTRACT_PATH,
        models.HEALTH_PATH,
        models.READY_PATH,
    }
    assert set(contract_document(Contract.UPLOAD)["paths"]) == {
        models_upload.UPLOAD_PATH,
        models_upload.UPLOAD_CONTRACT_PATH,
    }
    assert set(contract_document(Contract.SERVING)["paths"]) == {
        models_serving.MODEL_MANIFEST_PATH,
        models_serving.MODEL_FILE_PATH,
        models_serving.CLUSTER_MODEL_MANIFEST_PATH,
        models_serving.CLUSTER_MODEL_FILE_PATH,
        models_serving.CLUSTER_MODELS_PATH,
        models_serving.SERVING_CONTRACT_PATH,
    }
    assert set(contract_document(Contract.INTERNAL_LOOKUP)["paths"]) == {
        models_lookup.LOOKUP_PATH,
        models_lookup.LOOKUP_CONTRACT_PATH,
    }


@pytest.mark.parametrize("contract", ALL)
def test_operations_describe_auth_and_upstream_failures(contract: Contract) -> None:
    document = contract_document(contract)
    for path, item in document["paths"].items():
        for method, op in item.items():
            if (
                method not in {"get", "head", "put"}
                or path.endswith("openapi.json")
                or path in ("/healthz", "/readyz")
            ):
                continue
            assert set(op["responses"]) >= SECURED_EXPECTED, f"{method} {path}"
            # Uploads too: the URL names the object, the caller's own token says who uploads (D40).
            assert "security" not in op, f"{path} must use the document's bearer security"
    assert document["security"] == [{"bearerToken": []}]


def _crd_status(plural: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS_DIR / f"ai.deckhouse.io_{plural}.yaml").read_text(encoding="utf-8"))
    status: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    return status


def _vocabulary(schema: dict[str, Any]) -> dict[str, Any]:
    """Property names and enums, recursively: what the lookup must carry over from the CRD."""
    out: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if "properties" in prop:
            out[name] = _vocabulary(prop)
        elif "enum" in prop:
            out[name] = sorted(prop["enum"])
        elif "enum" in prop.get("items", {}):
            out[name] = sorted(prop["items"]["enum"])
        else:
            out[name] = None
    return out


@pytest.mark.parametrize("plural", ["models", "clustermodels"])
@pytest.mark.parametrize(("field", "schema"), [("resolved", "ResolvedProfile"), ("artifact", "Artifact")])
def test_lookup_carries_the_crd_status_vocabulary(plural: str, field: str, schema: str) -> None:
    document = contract_document(Contract.INTERNAL_LOOKUP)
    resolve = _resolver(document)

    def inline(node: dict[str, Any]) -> dict[str, Any]:
        node = resolve(node)
        if "properties" in node:
            node = {**node, "properties": {k: inline(v) for k, v in node["properties"].items()}}
        return node

    assert _vocabulary(inline(document["components"]["schemas"][schema])) == _vocabulary(
        _crd_status(plural)["properties"][field]
    )


@pytest.mark.parametrize("plural", ["models", "clustermodels"])
def test_lookup_phases_and_conditions_are_the_crds(plural: str) -> None:
    status = _crd_status(plural)["properties"]
    lookup = contract_schema("ModelLookup", Contract.INTERNAL_LOOKUP)
    assert lookup["properties"]["phase"]["enum"] == sorted(status["phase"]["enum"])
    condition = status["conditions"]["items"]
    assert set(contract_schema("Condition", Contract.INTERNAL_LOOKUP)["properties"]) == set(
        condition["properties"]
    )
    assert sorted(condition["required"]) == contract_schema("Condition", Contract.INTERNAL_LOOKUP)["required"]
