"""The API contracts: one OpenAPI document per API, loaded once from the package and served
verbatim as JSON (each at its API's `openapi.json`)."""

from __future__ import annotations

import enum
import functools
import importlib.resources
import json
from typing import Any, Final

import yaml


class Contract(enum.StrEnum):
    """The APIs of the api process, by the name of their document under `openapi/`."""

    CATALOG_IMPORT = "catalog-import"
    UPLOAD = "upload"
    SERVING = "serving"
    INTERNAL_LOOKUP = "internal-lookup"

    @property
    def resource(self) -> str:
        return f"openapi/{self.value}.yaml"


# Methods whose query parameters a document declares; OpenAPI has no others we serve.
_METHODS: Final = ("get", "head", "put", "post", "delete", "patch")


@functools.cache
def contract_document(contract: Contract = Contract.CATALOG_IMPORT) -> dict[str, Any]:
    """The OpenAPI document as a dict; callers must not modify it (it is shared)."""
    resource = contract.resource
    text = importlib.resources.files(__package__).joinpath(resource).read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        raise RuntimeError(f"{__package__}/{resource} is not an OpenAPI document (not a mapping)")
    return document


@functools.cache
def contract_json(contract: Contract = Contract.CATALOG_IMPORT) -> bytes:
    """The document as JSON, keys in the order the YAML file has them (what `openapi.json` serves)."""
    return json.dumps(contract_document(contract), ensure_ascii=False, separators=(",", ":")).encode()


def _parameters(item: dict[str, Any], operation: dict[str, Any]) -> list[dict[str, Any]]:
    # Path-item parameters apply to every operation under it; references are not used for query
    # parameters, only for path and header ones.
    return [*item.get("parameters", []), *operation.get("parameters", [])]


@functools.cache
def query_parameters() -> dict[tuple[str, str], frozenset[str]]:
    """Query parameter names per (path template, HTTP method) over every API's document."""
    declared: dict[tuple[str, str], frozenset[str]] = {}
    for contract in Contract:
        for path, item in contract_document(contract)["paths"].items():
            for method in _METHODS:
                operation = item.get(method)
                if operation is None:
                    continue
                declared[(path, method.upper())] = frozenset(
                    p["name"] for p in _parameters(item, operation) if p.get("in") == "query"
                )
    return declared
