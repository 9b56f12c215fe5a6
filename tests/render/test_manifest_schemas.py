"""Schema validation of rendered objects: built-ins strictly, CRD kinds by committed schemas, and
no kind without a decision."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from support.manifest_schemas import BUILTIN_KINDS, CRD_SCHEMAS, SCHEMAS_DIR, ManifestInvalid, validate_object

META = {"name": "x", "namespace": "d8-ai-models", "labels": {"heritage": "deckhouse", "module": "ai-models"}}
VALID_CRD_OBJECTS: list[dict[str, Any]] = [
    {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": META,
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]},
    },
    {
        "apiVersion": "deckhouse.io/v1",
        "kind": "GrafanaDashboardDefinition",
        "metadata": {"name": "d8-ai-models-x"},
        "spec": {"folder": "AI", "definition": "{}"},
    },
    {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": META,
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
            "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "x", "maxAllowed": {"cpu": "1", "memory": "1Gi"}}]
            },
        },
    },
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "ListenerSet",
        "metadata": META,
        "spec": {
            "parentRef": {"name": "public", "namespace": "d8-alb"},
            "listeners": [
                {
                    "name": "https",
                    "hostname": "ai-models.example.com",
                    "port": 443,
                    "protocol": "HTTPS",
                    "tls": {"mode": "Terminate", "certificateRefs": [{"name": "ai-models-httproute-tls"}]},
                }
            ],
        },
    },
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": META,
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "ListenerSet",
                    "name": "x",
                    "sectionName": "https",
                }
            ],
            "hostnames": ["ai-models.example.com"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/api/upload/v1"}}],
                    "backendRefs": [{"name": "ai-models-api", "port": 8443}],
                    "timeouts": {"request": "0s"},
                }
            ],
        },
    },
    {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": META,
        "spec": {
            "secretName": "ai-models-ingress-tls",
            "issuerRef": {"kind": "ClusterIssuer", "name": "letsencrypt"},
            "dnsNames": ["ai-models.example.com"],
        },
    },
    {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {**META, "namespace": "d8-monitoring"},
        "spec": {
            "selector": {"matchLabels": {"app": "ai-models-controller"}},
            "namespaceSelector": {"matchNames": ["d8-ai-models"]},
            "endpoints": [
                {
                    "port": "https-metrics",
                    "scheme": "https",
                    "bearerTokenSecret": {"name": "prometheus-token", "key": "token"},
                }
            ],
        },
    },
    {
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "SecurityPolicyException",
        "metadata": META,
        "spec": {
            "securityContext": {
                "privileged": {"allowedValue": True, "metadata": {"description": "CSI mounts"}}
            }
        },
    },
]


@pytest.mark.parametrize("obj", VALID_CRD_OBJECTS, ids=lambda obj: obj["kind"])
def test_valid_crd_objects_pass(obj: dict[str, Any]) -> None:
    validate_object(obj)


@pytest.mark.parametrize(
    ("index", "path", "value", "message"),
    [
        (0, ("spec", "groups", 0, "rules", 0, "for"), "five minutes", "does not match"),
        (0, ("spec", "groups", 0, "rules", 0, "record"), "both", "is valid under each of"),
        (1, ("spec", "folder"), None, "'folder' is a required property"),
        (2, ("spec", "updatePolicy", "updateMode"), "Sometimes", "is not one of"),
        (3, ("spec", "listeners", 0, "tls", "mode"), "Reencrypt", "is not one of"),
        (4, ("spec", "rules", 0, "matches", 0, "path", "type"), "Prefix", "is not one of"),
        (4, ("spec", "rules", 0, "backendRefs", 0, "port"), 70000, "is greater than the maximum"),
        (5, ("spec", "issuerRef"), None, "'issuerRef' is a required property"),
        (6, ("spec", "endpoints", 0, "sheme"), "https", "Additional properties are not allowed"),
        (7, ("spec", "securityContext", "privileged", "metadata", "description"), "TODO", "does not match"),
        (0, ("metadata", "labels", "module"), "ai models", "does not match"),
    ],
)
def test_crd_schemas_reject_invalid_objects(
    index: int, path: tuple[str | int, ...], value: object, message: str
) -> None:
    obj = json.loads(json.dumps(VALID_CRD_OBJECTS[index]))
    node = obj
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    with pytest.raises(ManifestInvalid, match=message):
        validate_object(obj)


def test_builtin_kinds_are_validated_strictly() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": META, "data": {"a": "b"}}
    validate_object(config_map)
    with pytest.raises(ManifestInvalid, match="Additional properties"):
        validate_object({**config_map, "spec": {}})
    with pytest.raises(ManifestInvalid, match="ConfigMap/d8-ai-models/x"):
        validate_object({**config_map, "data": {"a": 1}})


def test_a_kind_without_a_schema_decision_fails() -> None:
    with pytest.raises(ManifestInvalid, match=r"no schema decision for ai\.deckhouse\.io/v1alpha1 Model"):
        validate_object({"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "Model", "metadata": META})


def test_every_committed_schema_is_a_valid_json_schema_and_used() -> None:
    files = {path.name for path in SCHEMAS_DIR.glob("*.json")}
    assert files == {*CRD_SCHEMAS.values(), "objectmeta.json"}
    for name in files:
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS_DIR / name).read_text()))
    assert not set(CRD_SCHEMAS) & BUILTIN_KINDS
