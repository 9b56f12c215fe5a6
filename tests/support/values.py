"""Module values as addon-operator would hand them to Helm.

addon-operator reads `openapi/config-values.yaml` (user settings) and `openapi/values.yaml`
(`x-extend`-ed with the settings, plus `internal`), applies `default`s, closes every object that
does not say otherwise with `additionalProperties: false`, validates, and only then renders. The
test bed does the same so a broken setting fails with the setting's path, before Helm runs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

import jsonschema
import yaml

from support.paths import OPENAPI_DIR

MODULE_VALUES_KEY = "aiModels"
IMAGE_DIGEST = "sha256:" + "a1" * 32
COMMON_IMAGE_DIGEST = "sha256:" + "c2" * 32
REGISTRAR_IMAGE_DIGEST = "sha256:" + "d3" * 32

# What Deckhouse puts under `global` in a typical cluster; scenarios override pieces of it.
DEFAULT_GLOBAL: dict[str, Any] = {
    # The content of the platform's /deckhouse/version: the newest release, as Deckhouse writes it.
    # It picks the rbacv2 role model (templates/_rbac.tpl); older platforms are scenarios.
    "deckhouseVersion": "v1.78.0",
    "modulesImages": {
        "registry": {"base": "registry.deckhouse.io/deckhouse/ce"},
        "digests": {
            MODULE_VALUES_KEY: {"aiModels": IMAGE_DIGEST},
            # Deckhouse's shared images; the metrics sidecars use kube-rbac-proxy, the NodeCache
            # plugin the CSI node-driver-registrar built for the cluster's Kubernetes minor.
            "common": {
                "kubeRbacProxy": COMMON_IMAGE_DIGEST,
                "csiNodeDriverRegistrar134": REGISTRAR_IMAGE_DIGEST,
            },
        },
    },
    "discovery": {
        "clusterDomain": "cluster.local",
        "kubernetesVersion": "1.34.1",
        "clusterControlPlaneIsHighlyAvailable": False,
        "clusterMasterCount": 1,
        "d8SpecificNodeCountByRole": {"system": 2},
    },
    "modules": {
        "publicDomainTemplate": "%s.example.com",
        "https": {"mode": "CertManager", "certManager": {"clusterIssuerName": "letsencrypt"}},
        "ingressClass": "nginx",
        "placement": {},
    },
    # admission-policy-engine is on by default in Deckhouse; its CRD module serves
    # SecurityPolicyException.
    "enabledModules": [
        "ai-models",
        "admission-policy-engine-crd",
        "cert-manager",
        "operator-prometheus-crd",
        "vertical-pod-autoscaler-crd",
    ],
}

MINIMAL_SETTINGS: dict[str, Any] = {
    "artifacts": {
        "bucket": "ai-models",
        "endpoint": "https://s3.example.com",
        "credentialsSecretName": "ai-models-s3",
    },
}


class InvalidModuleValues(ValueError):
    """Values that addon-operator would refuse; the message names every offending setting."""


def _load(name: str) -> dict[str, Any]:
    with (OPENAPI_DIR / name).open(encoding="utf-8") as stream:
        loaded: dict[str, Any] = yaml.safe_load(stream)
    return loaded


@cache
def values_schema() -> dict[str, Any]:
    """The effective schema of `aiModels`: values.yaml extended with config-values.yaml, closed."""
    settings = _load("config-values.yaml")
    values = _load("values.yaml")
    values.pop("x-extend", None)
    merged = copy.deepcopy(settings)
    merged.setdefault("properties", {}).update(values.get("properties", {}))
    return _closed(merged)


@cache
def settings_schema() -> dict[str, Any]:
    """The schema of ModuleConfig `spec.settings`."""
    return _closed(_load("config-values.yaml"))


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """Close objects the way addon-operator does, and drop OpenAPI-only keys jsonschema ignores."""
    schema = copy.deepcopy(schema)

    def visit(node: dict[str, Any]) -> None:
        if node.get("type") == "object" and "additionalProperties" not in node and "properties" in node:
            node["additionalProperties"] = False
        for child in node.get("properties", {}).values():
            visit(child)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                visit(node[key])

    visit(schema)
    return schema


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """Fill `default`s top-down, as addon-operator does (an object's default is itself defaulted)."""
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    result = dict(value)
    for name, child in schema.get("properties", {}).items():
        if name not in result and "default" in child:
            result[name] = copy.deepcopy(child["default"])
        if name in result:
            result[name] = apply_defaults(child, result[name])
    return result


def _setting_path(error: jsonschema.ValidationError) -> str:
    return ".".join([MODULE_VALUES_KEY, *(str(part) for part in error.absolute_path)])


def validate(schema: Mapping[str, Any], value: Mapping[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"{_setting_path(error)}: {error.message}" for error in errors]
        raise InvalidModuleValues("invalid module values:\n" + "\n".join(lines))


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `override` into a copy of `base`; a `None` in `override` deletes the key."""
    result = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def module_values(
    settings: Mapping[str, Any] | None = None,
    *,
    internal: Mapping[str, Any] | None = None,
    global_overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Full Helm values: `global` plus `aiModels` (settings + internal), defaulted and validated.

    Raises `InvalidModuleValues` naming each offending setting.
    """
    user_settings = copy.deepcopy(dict(MINIMAL_SETTINGS if settings is None else settings))
    validate(settings_schema(), apply_defaults(settings_schema(), user_settings))
    module = dict(user_settings)
    if internal:
        module["internal"] = copy.deepcopy(dict(internal))
    module = apply_defaults(values_schema(), module)
    validate(values_schema(), module)
    return {
        "global": deep_merge(DEFAULT_GLOBAL, global_overrides or {}),
        MODULE_VALUES_KEY: module,
    }
