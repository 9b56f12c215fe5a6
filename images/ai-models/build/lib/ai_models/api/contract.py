"""The catalog-import contract: loaded once from the package and served verbatim as JSON."""

from __future__ import annotations

import functools
import importlib.resources
import json
from typing import Any, Final

import yaml

CONTRACT_RESOURCE: Final = "openapi/catalog-import.yaml"


@functools.cache
def contract_document() -> dict[str, Any]:
    """The OpenAPI document as a dict; callers must not modify it (it is shared)."""
    text = importlib.resources.files(__package__).joinpath(CONTRACT_RESOURCE).read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        raise RuntimeError(f"{__package__}/{CONTRACT_RESOURCE} is not an OpenAPI document (not a mapping)")
    return document


@functools.cache
def contract_json() -> bytes:
    """The document as JSON, keys in the order the YAML file has them (what `/openapi.json` serves)."""
    return json.dumps(contract_document(), ensure_ascii=False, separators=(",", ":")).encode()


@functools.cache
def query_parameters() -> dict[str, frozenset[str]]:
    """Query parameter names per path template of the document (GET operations)."""
    return {
        path: frozenset(
            p["name"] for p in item.get("get", {}).get("parameters", []) if p.get("in") == "query"
        )
        for path, item in contract_document()["paths"].items()
    }
