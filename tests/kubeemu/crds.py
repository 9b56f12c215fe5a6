"""CustomResourceDefinitions: what a CRD object turns into (served resource types), the apiserver's
checks and defaults on the CRD itself, its status, and loading CRD manifests from a directory."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kubeemu.crdvalidation import CRDSchema, FieldError
from kubeemu.jsonutil import jsoncopy
from kubeemu.resources import PrinterColumn, ResourceType

AGE_COLUMN = PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp")


def apply_crd_defaults(crd: dict[str, Any]) -> dict[str, Any]:
    crd = jsoncopy(crd)
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    return crd


def _split(problem: str) -> FieldError:
    field, _, body = problem.partition(": ")
    kind, _, detail = body.partition(": ")
    types = {"Required value": "Required", "Forbidden": "Forbidden", "Unsupported value": "NotSupported"}
    if kind in types:
        return FieldError(field, types[kind], detail)
    return FieldError(field, "Invalid", body.removeprefix("Invalid value: "))


def validate_crd(crd: dict[str, Any]) -> list[FieldError]:
    """The apiserver's checks on a CRD object (names, versions, and every version's schema)."""
    errors: list[FieldError] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    name = (crd.get("metadata") or {}).get("name") or ""
    if not group or "." not in group:
        errors.append(
            FieldError("spec.group", "Invalid", "should be a domain with at least one dot", value=group)
        )
    if not plural or plural != plural.lower():
        errors.append(FieldError("spec.names.plural", "Invalid", "must be lowercase", value=plural))
    if not names.get("kind"):
        errors.append(FieldError("spec.names.kind", "Required", ""))
    if name != f"{plural}.{group}":
        errors.append(
            FieldError("metadata.name", "Invalid", 'must be spec.names.plural+"."+spec.group', value=name)
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            FieldError(
                "spec.scope",
                "NotSupported",
                'supported values: "Cluster", "Namespaced"',
                value=spec.get("scope"),
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        errors.append(
            FieldError(
                "spec.versions",
                "Invalid",
                "must have exactly one version marked as storage version",
                value=None,
            )
        )
    storage = [v for v in versions if v.get("storage")]
    if versions and len(storage) != 1:
        errors.append(
            FieldError(
                "spec.versions",
                "Invalid",
                "must have exactly one version marked as storage version",
                value=None,
            )
        )
    for index, version in enumerate(versions):
        raw = (version.get("schema") or {}).get("openAPIV3Schema")
        if raw is None:
            errors.append(
                FieldError(
                    f"spec.versions[{index}].schema.openAPIV3Schema", "Required", "schemas are required"
                )
            )
            continue
        schema = CRDSchema.from_crd(crd, version=version.get("name"), check=False)
        errors.extend(_split(p) for p in schema.structural_errors() + schema.rule_errors())
    return errors


def resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """One served ResourceType per served version (all sharing the CRD's storage)."""
    spec = crd["spec"]
    names = spec["names"]
    out: list[ResourceType] = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        columns = tuple(
            PrinterColumn(
                name=c["name"],
                type=c.get("type", "string"),
                json_path=c.get("jsonPath", ""),
                format=c.get("format", ""),
                description=c.get("description", ""),
                priority=int(c.get("priority", 0)),
            )
            for c in version.get("additionalPrinterColumns") or []
        ) or (AGE_COLUMN,)
        subresources = version.get("subresources") or {}
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(k for k in ("status",) if subresources.get(k) is not None),
                printer_columns=columns,
                selectable_fields=tuple(
                    f.get("jsonPath", "").lstrip(".") for f in version.get("selectableFields") or []
                ),
                storage_group=spec["group"],
                storage_plural=names["plural"],
                crd_name=crd["metadata"]["name"],
                schema=CRDSchema.from_crd(crd, version=version["name"]),
            )
        )
    return out


def storage_version(crd: dict[str, Any]) -> str:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    return f"{spec['group']}/{version}"


def crd_status(crd: dict[str, Any], *, now: str) -> dict[str, Any]:
    names = crd["spec"]["names"]
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": now,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": now,
        },
    ]
    return {
        "conditions": conditions,
        "acceptedNames": jsoncopy(names),
        "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
    }


def load_crd_manifests(directory: Path) -> list[dict[str, Any]]:
    """CRDs from `*.yaml`/`*.yml` files in `directory`, skipping documentation twins (`doc-*`)."""
    out: list[dict[str, Any]] = []
    for path in sorted(directory.iterdir()):
        if path.name.startswith("doc-") or path.suffix not in (".yaml", ".yml") or not path.is_file():
            continue
        out.extend(_crds_in(yaml.safe_load_all(path.read_text())))
    return out


def _crds_in(documents: Iterable[Any]) -> list[dict[str, Any]]:
    return [d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
