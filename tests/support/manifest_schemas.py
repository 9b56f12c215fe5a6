"""Schema validation of every rendered object, by an explicit list of the kinds the module may render.

Built-in kinds are validated strictly against the Kubernetes 1.34 schemas bundled with
kubernetes-validate (unknown fields are errors). Kinds that come from CRDs are not in those
schemas; each has a small JSON schema under `tests/fixtures/schemas/`, written from the upstream
CRD of the version named in its title, closed wherever the upstream schema is. A kind in neither
list is an error: adding a kind to the chart means deciding here how it is validated.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
from referencing import Registry, Resource

from support.paths import REPO_ROOT

KUBERNETES_VERSION = "1.34.0"
SCHEMAS_DIR = REPO_ROOT / "tests" / "fixtures" / "schemas"

Kind = tuple[str, str]  # (apiVersion, kind)

# Validated by kubernetes-validate (Kubernetes 1.34, strict).
BUILTIN_KINDS: frozenset[Kind] = frozenset(
    {
        ("v1", "Namespace"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "Service"),
        ("v1", "ServiceAccount"),
        ("v1", "PersistentVolumeClaim"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("policy/v1", "PodDisruptionBudget"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("networking.k8s.io/v1", "Ingress"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
        ("storage.k8s.io/v1", "CSIDriver"),
    }
)

# Validated against tests/fixtures/schemas/<file>.
CRD_SCHEMAS: dict[Kind, str] = {
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.monitoring.coreos.com.v1.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.monitoring.coreos.com.v1.json",
    ("deckhouse.io/v1", "GrafanaDashboardDefinition"): "grafanadashboarddefinition.deckhouse.io.v1.json",
    (
        "deckhouse.io/v1alpha1",
        "SecurityPolicyException",
    ): "securitypolicyexception.deckhouse.io.v1alpha1.json",
    ("autoscaling.k8s.io/v1", "VerticalPodAutoscaler"): "verticalpodautoscaler.autoscaling.k8s.io.v1.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute.gateway.networking.k8s.io.v1.json",
    ("gateway.networking.k8s.io/v1", "ListenerSet"): "listenerset.gateway.networking.k8s.io.v1.json",
    ("cert-manager.io/v1", "Certificate"): "certificate.cert-manager.io.v1.json",
    # With the observability module on, as lib-helm renders rules and dashboards then (D128).
    (
        "observability.deckhouse.io/v1alpha1",
        "ClusterObservabilityMetricsRulesGroup",
    ): "clusterobservabilitymetricsrulesgroup.observability.deckhouse.io.v1alpha1.json",
    (
        "observability.deckhouse.io/v1alpha1",
        "ClusterObservabilityDashboard",
    ): "clusterobservabilitydashboard.observability.deckhouse.io.v1alpha1.json",
}

CLUSTER_SCOPED_KINDS: frozenset[str] = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "CSIDriver",
        "GrafanaDashboardDefinition",
        "ClusterObservabilityMetricsRulesGroup",
        "ClusterObservabilityDashboard",
    }
)


class ManifestInvalid(ValueError):
    """A rendered object that its schema rejects, or whose kind has no schema decision."""


def kind_of(obj: dict[str, Any]) -> Kind:
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')}/{namespace}{meta.get('name')}"


@cache
def _registry() -> Registry:
    resources = [
        (path.name, Resource.from_contents(json.loads(path.read_text(encoding="utf-8"))))
        for path in SCHEMAS_DIR.glob("*.json")
    ]
    return Registry().with_resources(resources)


@cache
def _crd_validator(schema_file: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS_DIR / schema_file).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=_registry())


@cache
def _builtin_error(serialized: str) -> str | None:
    # Identical objects recur across scenarios (RBAC, namespace); validating each once keeps the
    # suite fast, as kubernetes-validate costs about 12 ms per object.
    try:
        kubernetes_validate.validate(json.loads(serialized), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = ".".join(str(part) for part in error.path)
        return f"{path}: {error.message}" if path else str(error.message)
    return None


def validate_object(obj: dict[str, Any]) -> None:
    """Raise `ManifestInvalid` unless the object is valid for its kind."""
    kind = kind_of(obj)
    if kind in BUILTIN_KINDS:
        error = _builtin_error(json.dumps(obj, sort_keys=True))
        if error is not None:
            raise ManifestInvalid(f"{describe(obj)}: {error}")
        return
    if kind in CRD_SCHEMAS:
        errors = sorted(
            _crd_validator(CRD_SCHEMAS[kind]).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))
        )
        if errors:
            lines = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]
            raise ManifestInvalid(f"{describe(obj)}:\n  " + "\n  ".join(lines))
        return
    raise ManifestInvalid(
        f"{describe(obj)}: no schema decision for {kind[0]} {kind[1]}; add it to BUILTIN_KINDS or "
        "CRD_SCHEMAS in tests/support/manifest_schemas.py"
    )


def is_namespaced(obj: dict[str, Any]) -> bool:
    return str(obj.get("kind")) not in CLUSTER_SCOPED_KINDS
