"""OpenAPI v3 documents (/openapi/v3 and one per group-version), shaped as kubectl 1.36 reads them.

kubectl looks in the group-version document for the PATCH operation of a kind (matched by
`x-kubernetes-group-version-kind`) and, when it declares the `fieldValidation` query parameter,
leaves validation to the server (`fieldValidation=Strict`). Patch operations list the patch
content types the server accepts; built-ins do not advertise strategic merge here, so kubectl
computes apply patches from its compiled-in types (as it does when a server lacks the schema).
Custom resources carry their CRD schema under components.schemas.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from kubeemu.discovery import KUBERNETES_VERSION
from kubeemu.jsonutil import jsoncopy
from kubeemu.patching import CUSTOM_RESOURCE_PATCH_TYPES, JSON_PATCH, MERGE_PATCH
from kubeemu.resources import Registry, ResourceType

_QUERY = "query"


def _param(name: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": _QUERY, "schema": {"type": kind, "uniqueItems": True}}


_WRITE_PARAMS = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
_PATH_PARAMS = {
    "name": {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    },
    "namespace": {
        "name": "namespace",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "uniqueItems": True},
    },
}


def _component_name(rtype: ResourceType) -> str:
    group = ".".join(reversed(rtype.group.split("."))) if rtype.group else "core"
    return f"{group}.{rtype.version}.{rtype.kind}"


def _op(
    rtype: ResourceType,
    action: str,
    *,
    ref: str,
    params: list[dict[str, Any]] | None = None,
    body_types: tuple[str, ...] = (),
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": f"{action}{rtype.kind}",
        "parameters": list(params or []),
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rtype.group,
            "version": rtype.version,
            "kind": rtype.kind,
        },
    }
    if body_types:
        op["requestBody"] = {"content": {t: {"schema": {"$ref": ref}} for t in body_types}, "required": True}
    return op


def _paths_for(rtype: ResourceType, ref: str) -> dict[str, Any]:
    base = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
    scope = f"{base}/namespaces/{{namespace}}" if rtype.namespaced else base
    scope_params = [_PATH_PARAMS["namespace"]] if rtype.namespaced else []
    collection = f"{scope}/{rtype.plural}"
    item = f"{collection}/{{name}}"
    patch_types = (
        CUSTOM_RESOURCE_PATCH_TYPES
        if rtype.is_custom
        else (JSON_PATCH, MERGE_PATCH, "application/apply-patch+yaml")
    )
    if rtype.virtual:
        return {
            collection: {
                "post": _op(rtype, "post", ref=ref, params=_WRITE_PARAMS, body_types=("application/json",)),
                "parameters": scope_params,
            }
        }
    paths: dict[str, Any] = {
        collection: {
            "get": _op(rtype, "list", ref=ref, params=[_param("labelSelector"), _param("fieldSelector")]),
            "post": _op(rtype, "post", ref=ref, params=_WRITE_PARAMS, body_types=("application/json",)),
            "delete": _op(rtype, "deletecollection", ref=ref),
            "parameters": scope_params,
        },
        item: {
            "get": _op(rtype, "get", ref=ref),
            "put": _op(rtype, "put", ref=ref, params=_WRITE_PARAMS, body_types=("application/json",)),
            "patch": _op(
                rtype,
                "patch",
                ref=ref,
                params=[*_WRITE_PARAMS, _param("force", "boolean")],
                body_types=patch_types,
            ),
            "delete": _op(rtype, "delete", ref=ref, params=[_param("dryRun")]),
            "parameters": [_PATH_PARAMS["name"], *scope_params],
        },
    }
    for sub in sorted(rtype.subresources - {"token"}):
        paths[f"{item}/{sub}"] = {
            "get": _op(rtype, "get", ref=ref),
            "put": _op(rtype, "put", ref=ref, params=_WRITE_PARAMS, body_types=("application/json",)),
            "patch": _op(
                rtype,
                "patch",
                ref=ref,
                params=[*_WRITE_PARAMS, _param("force", "boolean")],
                body_types=patch_types,
            ),
            "parameters": [_PATH_PARAMS["name"], *scope_params],
        }
    return paths


def _schema_for(rtype: ResourceType) -> dict[str, Any]:
    schema: dict[str, Any] = (
        jsoncopy(dict(rtype.schema.raw)) if rtype.schema is not None else {"type": "object"}
    )
    schema["x-kubernetes-group-version-kind"] = [
        {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    ]
    return schema


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = sorted(registry.in_group_version(group, version), key=lambda r: r.plural)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rtype in types:
        name = _component_name(rtype)
        schemas[name] = _schema_for(rtype)
        paths.update(_paths_for(rtype, f"#/components/schemas/{name}"))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenAPIDocuments:
    """Builds documents lazily and caches them until the registry changes (a CRD is added or removed)."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._lock = threading.Lock()
        self._generation = -1
        self._docs: dict[str, tuple[bytes, str]] = {}

    def _refresh(self) -> None:
        if self._generation == self._registry.generation:
            return
        docs: dict[str, tuple[bytes, str]] = {}
        for group, versions in self._registry.groups():
            for version in versions:
                doc = group_version_document(self._registry, group, version)
                if doc is not None:
                    raw = json.dumps(doc, separators=(",", ":")).encode()
                    docs[_gv_key(group, version)] = (raw, hashlib.sha512(raw).hexdigest()[:64].upper())
        self._docs = docs
        self._generation = self._registry.generation

    def index(self) -> dict[str, Any]:
        with self._lock:
            self._refresh()
            return {
                "paths": {
                    key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
                    for key, (_, digest) in self._docs.items()
                }
            }

    def document(self, key: str) -> bytes | None:
        with self._lock:
            self._refresh()
            entry = self._docs.get(key.strip("/"))
            return entry[0] if entry else None
