"""The hooks' jqFilters run by a real jq engine over objects as the API server returns them.

The other hook tests feed hand-written `filterResult`s to the hooks, so a jqFilter that drops or
renames a field the hook reads would pass them. Here libjq (the PyPI package `jq`) runs every
kubernetes binding's `jqFilter`, taken from the hook's own binding config, over full objects:
metadata with uid, resourceVersion, managedFields, labels and annotations as a real cluster has
them, and edge objects that lack optional fields (no labels, no annotations, no data, a claim
without volumeName, a StorageClass without the default annotation...).

- `FILTER_SAMPLES` pins, per (hook, binding), each sample object's exact filter result. Every
  binding with a jqFilter must have samples: a new hook or binding fails
  `test_every_binding_with_a_jq_filter_has_samples` until it adds some.
- The scenarios route a cluster's objects to the bindings whose kind and selectors match (as
  shell-operator does), build the snapshots from the jq output and run the hook with
  `deckhouse.hook.testrun`, asserting on its values, Kubernetes operations and metrics.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as dt
import importlib.util
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jq  # type: ignore[import-not-found]
import jsonpatch
import pytest
from deckhouse import hook

from ai_models import names
from ai_models.domain.delivery.template import (
    CachedModel,
    DeliveredModel,
    gate,
    rewrite,
    rewrite_for_node_cache,
    strip,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind
from support.render import render_chart
from support.values import MINIMAL_SETTINGS, module_values

HOOKS_DIR = Path(__file__).resolve().parents[2] / "hooks"
HOOK_NAMES = sorted(path.stem for path in HOOKS_DIR.glob("*.py"))

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
OLD = (NOW - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
YOUNG = (NOW - dt.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Obj = dict[str, Any]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ----- objects as the API server returns them ----------------------------------------------------------


def _fields(node: Any) -> Any:
    """A FieldsV1 set for `node` (what server-side field tracking records for every write)."""
    if isinstance(node, Mapping):
        return {".": {}, **{f"f:{key}": _fields(value) for key, value in node.items()}}
    return {}


def served(
    api_version: str,
    kind: str,
    name: str,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str = OLD,
    manager: str = "kubectl-client-side-apply",
    applied: bool = False,
    meta: Mapping[str, Any] | None = None,
    **body: Any,
) -> Obj:
    """A full object: server-set metadata, managedFields, and the optional parts only when given
    (the API server omits empty labels, annotations and data). `applied` adds kubectl's
    last-applied-configuration annotation, as `kubectl apply` leaves it."""
    written: Obj = {"apiVersion": api_version, "kind": kind, **copy.deepcopy(body)}
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    all_annotations = dict(annotations or {})
    if applied:
        manifest = {
            **written,
            "metadata": {**metadata, **({"annotations": dict(annotations)} if annotations else {})},
        }
        all_annotations[LAST_APPLIED] = json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n"
    if all_annotations:
        metadata["annotations"] = all_annotations
    tracked = {k: v for k, v in written.items() if k not in {"apiVersion", "kind", "status"}}
    tracked_meta = {k: v for k, v in metadata.items() if k in {"labels", "annotations"}}
    managed = [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": created,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields({**tracked, **({"metadata": tracked_meta} if tracked_meta else {})}),
        }
    ]
    if "status" in written:
        managed.append(
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": api_version,
                "time": created,
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields({"status": written["status"]}),
                "subresource": "status",
            }
        )
    metadata.update(
        {
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{namespace}/{name}")),
            "resourceVersion": "48213",
            "creationTimestamp": created,
            "managedFields": managed,
            **dict(meta or {}),
        }
    )
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **copy.deepcopy(body)}


def secret(
    name: str, namespace: str, data: Mapping[str, str] | None, *, type_: str = "Opaque", **options: Any
) -> Obj:
    body: Obj = {"type": type_}
    if data is not None:
        body["data"] = {key: b64(value) for key, value in data.items()}
    return served("v1", "Secret", name, namespace=namespace, **options, **body)


HELM: dict[str, Any] = {
    "labels": {"app.kubernetes.io/managed-by": "Helm", "heritage": "deckhouse", "module": "ai-models"},
    "annotations": {"meta.helm.sh/release-name": "ai-models", "meta.helm.sh/release-namespace": "d8-system"},
    "manager": "deckhouse-controller",
}
HOOK_WRITTEN: dict[str, Any] = {
    "labels": {"heritage": "deckhouse", "module": "ai-models"},
    "manager": "deckhouse-controller",
}

S3_CREDENTIALS = secret(
    "ai-models-s3",
    "d8-system",
    {"accessKey": "AKIAEXAMPLE", "secretKey": "wJalrXUtnFEMI/K7MDENG", "region": "eu-central-1"},
    applied=True,
)
S3_CA = secret(
    "ai-models-s3-ca",
    "d8-system",
    {"ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "tls.crt": "leaf"},
    labels={"app": "minio"},
)
S3_PENDING = secret("s3-pending", "d8-system", None)  # created empty; the keys come later
HELM_RELEASE = secret(
    "sh.helm.release.v1.ai-models.v3",
    "d8-system",
    {"release": "H4sIAAAAAAAC/+y9"},
    type_="helm.sh/release.v1",
    labels={"owner": "helm", "name": "ai-models", "status": "deployed", "version": "3"},
    manager="helm",
)
SAME_NAME_ELSEWHERE = secret(
    "ai-models-s3", "default", {"accessKey": "NOT-THIS", "secretKey": "NOT-THIS"}, applied=True
)
COPY_CREDENTIALS = secret(
    "ai-models-artifacts-credentials",
    "d8-ai-models",
    {"accessKey": "AKIAEXAMPLE", "secretKey": "wJalrXUtnFEMI/K7MDENG"},
    **HOOK_WRITTEN,
)
COPY_CA = secret(
    "ai-models-artifacts-ca",
    "d8-ai-models",
    {"ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
    **HOOK_WRITTEN,
)
COPY_CA_WITHOUT_DATA = secret("ai-models-artifacts-ca", "d8-ai-models", None, **HOOK_WRITTEN)
# The module namespace as Helm creates it (templates/namespace.yaml), one being deleted, another one.
MODULE_NAMESPACE_OBJ = served(
    "v1",
    "Namespace",
    "d8-ai-models",
    labels={**HELM["labels"], "kubernetes.io/metadata.name": "d8-ai-models"},
    annotations=HELM["annotations"],
    manager="helm",
    spec={"finalizers": ["kubernetes"]},
    status={"phase": "Active"},
)
MODULE_NAMESPACE_TERMINATING = served(
    "v1",
    "Namespace",
    "d8-ai-models",
    labels={"kubernetes.io/metadata.name": "d8-ai-models"},
    meta={"deletionTimestamp": YOUNG},
    spec={"finalizers": ["kubernetes"]},
    status={"phase": "Terminating"},
)
OTHER_NAMESPACE = served("v1", "Namespace", "d8-system", status={"phase": "Active"})
API_TLS_UNRELATED = secret(
    "ai-models-api-tls", "d8-ai-models", {"tls.crt": "c", "tls.key": "k"}, type_="kubernetes.io/tls", **HELM
)
ROOT_CA_SECRET = secret(
    "ai-models-root-ca",
    "d8-ai-models",
    {"tls.crt": "CA CERTIFICATE", "tls.key": "CA KEY"},
    type_="kubernetes.io/tls",
    **HELM,
)
ROOT_CA_WITHOUT_DATA = secret("ai-models-root-ca", "d8-ai-models", None, type_="kubernetes.io/tls", **HELM)
API_TLS_SECRET = secret(
    "ai-models-api-tls",
    "d8-ai-models",
    {"ca.crt": "CA CERTIFICATE", "tls.crt": "API CERTIFICATE", "tls.key": "API KEY"},
    type_="kubernetes.io/tls",
    **HELM,
)
API_TLS_WITHOUT_KEY = secret(
    "ai-models-api-tls", "d8-ai-models", {"tls.crt": "API CERTIFICATE"}, type_="kubernetes.io/tls", **HELM
)
CONTROLLER_TLS_SECRET = secret(
    "ai-models-controller-tls",
    "d8-ai-models",
    {"ca.crt": "CA CERTIFICATE", "tls.crt": "CONTROLLER CERTIFICATE", "tls.key": "CONTROLLER KEY"},
    type_="kubernetes.io/tls",
    **HELM,
)


CERT = "-----BEGIN CERTIFICATE-----\nMIIBserver\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIBsecret\n-----END PRIVATE KEY-----\n"
ISSUER = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"
CUSTOM_TLS = secret(  # as cert-manager leaves a certificate it issued
    "ai-models-tls",
    "d8-system",
    {"ca.crt": ISSUER, "tls.crt": CERT, "tls.key": KEY, "keystore.p12": "binary"},
    type_="kubernetes.io/tls",
    labels={"controller.cert-manager.io/fao": "true"},
    annotations={
        "cert-manager.io/certificate-name": "ai-models-tls",
        "cert-manager.io/issuer-kind": "ClusterIssuer",
        "cert-manager.io/alt-names": "ai-models.example.com",
    },
    manager="cert-manager-certificates-issuing",
)
CUSTOM_TLS_WITHOUT_CA = secret(
    "wildcard-tls", "d8-system", {"tls.crt": CERT, "tls.key": KEY}, type_="kubernetes.io/tls", applied=True
)


# ----- disable_cleanup: what the module left in a user namespace -------------------------------------

DELIVERED_LABELS = {"app": "web", names.DELIVERY_TEMPLATE_LABEL: names.DELIVERY_TEMPLATE_LABEL_VALUE}
QWEN = DeliveredModel("qwen", "sha256:" + "a1" * 32)
CACHED_QWEN = CachedModel(ModelKey(ModelKind.MODEL, "team-a", "qwen"), "sha256:" + "a1" * 32)
SHARED_CLAIM = "ai-models-web-0123456789"


def users_pod_template() -> Obj:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "a"}},
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": "vllm:1",
                    "env": [{"name": "MODEL", "value": "$(AI_MODELS_MODELS_DIR)/qwen"}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "securityContext": {"runAsNonRoot": True},
        },
    }


def template_seen(template: Obj) -> Obj:
    """What the workload filters keep of a pod template: annotations, gates, volumes, node
    selector, and each container's name, env and mounts."""
    spec = template["spec"]
    kept: Obj = {key: spec[key] for key in ("schedulingGates", "volumes", "nodeSelector") if spec.get(key)}
    for field in ("initContainers", "containers"):
        if spec.get(field):
            kept[field] = [
                {key: c[key] for key in ("name", "env", "volumeMounts") if key in c} for c in spec[field]
            ]
    return {"metadata": {"annotations": template["metadata"].get("annotations") or {}}, "spec": kept}


SHARED_TEMPLATE = gate(rewrite(users_pod_template(), claim=SHARED_CLAIM, models=[QWEN]))
CACHE_TEMPLATE = rewrite_for_node_cache(
    users_pod_template(), models=[CACHED_QWEN], node_selector={names.NODE_CACHE_READY_LABEL: "true"}
)
REPORT = {
    names.MODEL_ANNOTATION: "qwen",
    names.DELIVERY_REASON_ANNOTATION: "Delivered",
    names.DELIVERY_MESSAGE_ANNOTATION: "1 model delivered",
}
DELIVERED_DEPLOYMENT = served(
    "apps/v1",
    "Deployment",
    "web",
    namespace="team-a",
    labels=DELIVERED_LABELS,
    annotations=REPORT,
    applied=True,
    spec={"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": SHARED_TEMPLATE},
    status={"replicas": 2, "unavailableReplicas": 2},
)
UNLABELLED_DEPLOYMENT = served(
    "apps/v1",
    "Deployment",
    "other",
    namespace="team-a",
    spec={"selector": {"matchLabels": {"app": "other"}}, "template": gate(users_pod_template())},
)
CACHE_STATEFUL_SET = served(
    "apps/v1",
    "StatefulSet",
    "embed",
    namespace="team-b",
    labels=DELIVERED_LABELS,
    annotations={names.MODEL_ANNOTATION: "qwen"},
    spec={"serviceName": "embed", "selector": {"matchLabels": {"app": "web"}}, "template": CACHE_TEMPLATE},
)
GATED_DAEMON_SET = served(
    "apps/v1",
    "DaemonSet",
    "agent",
    namespace="team-a",
    labels=DELIVERED_LABELS,
    spec={"selector": {"matchLabels": {"app": "web"}}, "template": gate(users_pod_template())},
)
SHARED_CRON_JOB = served(
    "batch/v1",
    "CronJob",
    "nightly",
    namespace="team-a",
    labels=DELIVERED_LABELS,
    spec={
        "schedule": "@daily",
        "jobTemplate": {
            "spec": {"template": rewrite(users_pod_template(), claim=SHARED_CLAIM, models=[QWEN])}
        },
    },
)
FINALIZED_MODEL = served(
    f"{names.API_GROUP}/{names.API_VERSION}",
    "Model",
    "qwen",
    namespace="team-a",
    meta={"finalizers": ["example.com/keep", names.MODEL_FINALIZER]},
    spec={"source": {"huggingFace": {"repository": "acme/qwen"}}},
    status={"phase": "Ready"},
)
FINALIZED_CLUSTER_MODEL = served(
    f"{names.API_GROUP}/{names.API_VERSION}",
    "ClusterModel",
    "bge",
    meta={"finalizers": [names.MODEL_FINALIZER]},
    spec={"source": {"huggingFace": {"repository": "acme/bge"}}},
)
PLAIN_SOURCE = served(
    f"{names.API_GROUP}/{names.API_VERSION}",
    "ModelCatalogSource",
    "hub",
    spec={"provider": "HuggingFace"},
)
FINALIZED_SOURCE = served(
    f"{names.API_GROUP}/{names.API_VERSION}",
    "ModelCatalogSource",
    "hub-2",
    meta={"finalizers": [names.CATALOG_FINALIZER]},
    spec={"provider": "HuggingFace"},
)


def pod(name: str, template: Obj, *, phase: str = "Pending") -> Obj:
    return served(
        "v1",
        "Pod",
        name,
        namespace="team-a",
        labels={"app": "web"},
        manager="kube-controller-manager",
        meta={
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c", "uid": "u"}
            ]
        },
        spec={**template["spec"], "nodeName": ""} if phase != "Pending" else dict(template["spec"]),
        status={"phase": phase},
    )


GATED_WITH_CLAIM = pod("web-5d9c-a", SHARED_TEMPLATE)
GATED_ONLY = pod("agent-x", gate(users_pod_template()))
RUNNING_POD = pod(
    "web-5d9c-b", rewrite(users_pod_template(), claim=SHARED_CLAIM, models=[QWEN]), phase="Running"
)
MATERIALIZATION_LABELS = {
    names.COMPONENT_LABEL: names.MATERIALIZATION_COMPONENT,
    names.MODULE_LABEL: names.MODULE,
    names.HERITAGE_LABEL: names.HERITAGE,
    names.OWNER_KIND_LABEL: "Deployment",
}
MATERIALIZE_JOB = served(
    "batch/v1",
    "Job",
    SHARED_CLAIM,
    namespace="team-a",
    labels=MATERIALIZATION_LABELS,
    manager="ai-models-controller",
    spec={"backoffLimit": 2, "template": {"spec": {"containers": [{"name": "materialize", "image": "x"}]}}},
)
MATERIALIZE_TOKEN = secret(
    f"{SHARED_CLAIM}-token", "team-a", {"token": "eyJhbGciOi"}, labels=MATERIALIZATION_LABELS
)
SHARED_CLAIM_OBJ = served(
    "v1",
    "PersistentVolumeClaim",
    SHARED_CLAIM,
    namespace="team-a",
    labels={names.SHARED_PVC_LABEL: names.SHARED_PVC_LABEL_VALUE},
    spec={"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "2Gi"}}},
    status={"phase": "Bound", "capacity": {"storage": "4Gi"}},
)
CACHE_NODE = served(
    "v1",
    "Node",
    "gpu-1",
    labels={"kubernetes.io/hostname": "gpu-1", names.NODE_CACHE_READY_LABEL: "false"},
    annotations={names.NODE_CACHE_REPORT_ANNOTATION: '{"usedBytes": 0}'},
    manager="ai-models-node-cache",
    spec={"podCIDR": "10.0.0.0/24"},
)
PLAIN_NODE = served("v1", "Node", "cpu-1", labels={"kubernetes.io/hostname": "cpu-1"}, spec={})
PENDING_CLAIM = served(
    "v1",
    "PersistentVolumeClaim",
    "ai-models-embed-99",
    namespace="team-b",
    labels={names.SHARED_PVC_LABEL: names.SHARED_PVC_LABEL_VALUE},
    spec={"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
)


# ----- expected filter results per (hook, binding) ------------------------------------------------------


FILTER_SAMPLES: dict[tuple[str, str], list[tuple[Obj, Any]]] = {
    ("artifacts_credentials", "source_secrets"): [
        (
            S3_CREDENTIALS,
            {
                "name": "ai-models-s3",
                "data": {"accessKey": b64("AKIAEXAMPLE"), "secretKey": b64("wJalrXUtnFEMI/K7MDENG")},
            },
        ),
        (
            S3_CA,
            {
                "name": "ai-models-s3-ca",
                "data": {"ca.crt": b64("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")},
            },
        ),
        (S3_PENDING, {"name": "s3-pending", "data": {}}),
    ],
    ("copy_custom_certificate", "source_secrets"): [
        (
            CUSTOM_TLS,
            {
                "name": "ai-models-tls",
                "data": {"tls.crt": b64(CERT), "tls.key": b64(KEY), "ca.crt": b64(ISSUER)},
            },
        ),
        (
            CUSTOM_TLS_WITHOUT_CA,
            {"name": "wildcard-tls", "data": {"tls.crt": b64(CERT), "tls.key": b64(KEY)}},
        ),
        (S3_CREDENTIALS, {"name": "ai-models-s3", "data": {}}),
        (S3_PENDING, {"name": "s3-pending", "data": {}}),
    ],
    ("artifacts_credentials", "copies"): [
        (
            COPY_CREDENTIALS,
            {
                "name": "ai-models-artifacts-credentials",
                "data": {"accessKey": b64("AKIAEXAMPLE"), "secretKey": b64("wJalrXUtnFEMI/K7MDENG")},
            },
        ),
        (COPY_CA_WITHOUT_DATA, {"name": "ai-models-artifacts-ca", "data": {}}),
    ],
    ("artifacts_credentials", "module_namespace"): [
        (MODULE_NAMESPACE_OBJ, {"name": "d8-ai-models", "terminating": False}),
        (MODULE_NAMESPACE_TERMINATING, {"name": "d8-ai-models", "terminating": True}),
    ],
    ("internal_tls", "root_ca"): [
        (ROOT_CA_SECRET, {"crt": b64("CA CERTIFICATE"), "key": b64("CA KEY")}),
        (ROOT_CA_WITHOUT_DATA, {"crt": "", "key": ""}),
    ],
    ("internal_tls", "api_tls"): [
        (API_TLS_SECRET, {"crt": b64("API CERTIFICATE"), "key": b64("API KEY")}),
        (API_TLS_WITHOUT_KEY, {"crt": b64("API CERTIFICATE"), "key": ""}),
    ],
    ("internal_tls", "controller_tls"): [
        (CONTROLLER_TLS_SECRET, {"crt": b64("CONTROLLER CERTIFICATE"), "key": b64("CONTROLLER KEY")}),
    ],
    ("disable_cleanup", "deployments"): [
        (
            DELIVERED_DEPLOYMENT,
            {
                "namespace": "team-a",
                "name": "web",
                "annotations": [names.DELIVERY_MESSAGE_ANNOTATION, names.DELIVERY_REASON_ANNOTATION],
                "template": template_seen(SHARED_TEMPLATE),
            },
        ),
    ],
    ("disable_cleanup", "statefulsets"): [
        (
            CACHE_STATEFUL_SET,
            {
                "namespace": "team-b",
                "name": "embed",
                "annotations": [],
                "template": template_seen(CACHE_TEMPLATE),
            },
        ),
    ],
    ("disable_cleanup", "daemonsets"): [
        (
            GATED_DAEMON_SET,
            {
                "namespace": "team-a",
                "name": "agent",
                "annotations": [],
                "template": template_seen(gate(users_pod_template())),
            },
        ),
    ],
    ("disable_cleanup", "cronjobs"): [
        (
            SHARED_CRON_JOB,
            {
                "namespace": "team-a",
                "name": "nightly",
                "annotations": [],
                "template": template_seen(rewrite(users_pod_template(), claim=SHARED_CLAIM, models=[QWEN])),
            },
        ),
    ],
    ("disable_cleanup", "models"): [
        (
            FINALIZED_MODEL,
            {
                "namespace": "team-a",
                "name": "qwen",
                "finalizers": ["example.com/keep", names.MODEL_FINALIZER],
            },
        ),
    ],
    ("disable_cleanup", "clustermodels"): [
        (FINALIZED_CLUSTER_MODEL, {"namespace": None, "name": "bge", "finalizers": [names.MODEL_FINALIZER]}),
    ],
    ("disable_cleanup", "catalogsources"): [
        (PLAIN_SOURCE, {"namespace": None, "name": "hub", "finalizers": []}),
        (FINALIZED_SOURCE, {"namespace": None, "name": "hub-2", "finalizers": [names.CATALOG_FINALIZER]}),
    ],
    ("disable_cleanup", "gated_pods"): [
        (
            GATED_WITH_CLAIM,
            {
                "namespace": "team-a",
                "name": "web-5d9c-a",
                "gates": [names.DELIVERY_SCHEDULING_GATE],
                "moduleVolumes": True,
            },
        ),
        (
            GATED_ONLY,
            {
                "namespace": "team-a",
                "name": "agent-x",
                "gates": [names.DELIVERY_SCHEDULING_GATE],
                "moduleVolumes": False,
            },
        ),
    ],
    ("disable_cleanup", "materialize_jobs"): [
        (MATERIALIZE_JOB, {"namespace": "team-a", "name": SHARED_CLAIM}),
    ],
    ("disable_cleanup", "materialize_secrets"): [
        (MATERIALIZE_TOKEN, {"namespace": "team-a", "name": f"{SHARED_CLAIM}-token"}),
    ],
    ("disable_cleanup", "cache_nodes"): [(CACHE_NODE, {"name": "gpu-1"})],
    ("disable_cleanup", "shared_claims"): [
        (SHARED_CLAIM_OBJ, {"namespace": "team-a", "name": SHARED_CLAIM, "storage": "4Gi"}),
        (PENDING_CLAIM, {"namespace": "team-b", "name": "ai-models-embed-99", "storage": "1Gi"}),
    ],
}


# ----- the binding configs and shell-operator's part -------------------------------------------------


@cache
def hook_config(name: str) -> dict[str, Any]:
    """The binding config the hook prints on `--config` (`hook.run` prints its module's `config`;
    tests/hooks/test_hook_files.py runs every hook with `--config` to prove it)."""
    spec = importlib.util.spec_from_file_location(f"ai_models_hook_config_{name}", HOOKS_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # conftest.py put hooks/ on sys.path for `lib.*`
    config: dict[str, Any] = json.loads(module.config)
    return config


def kubernetes_bindings(name: str) -> dict[str, dict[str, Any]]:
    return {binding["name"]: binding for binding in hook_config(name).get("kubernetes", [])}


def run_jq(expression: str, obj: Obj) -> Any:
    """The filter's single result, as shell-operator stores it in `filterResult`."""
    results = jq.compile(expression).input_value(obj).all()
    assert len(results) == 1, f"{expression} gave {len(results)} results"
    return results[0]


def _label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    assert not unknown, f"label selector keys not emulated here: {unknown}"
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        assert operator in {"In", "NotIn", "Exists", "DoesNotExist"}, operator
    return True


# The fields the API server lets a Pod watch select on that the hooks use.
FIELDS = {"status.phase": lambda obj: (obj.get("status") or {}).get("phase", "")}


def _field_selector_matches(selector: Mapping[str, Any], obj: Obj) -> bool:
    for expression in selector.get("matchExpressions") or []:
        field, operator, value = expression["field"], expression["operator"], expression["value"]
        assert field in FIELDS, f"not emulated here: {expression}"
        assert operator in {"Equals", "NotEquals"}, f"not emulated here: {expression}"
        if (FIELDS[field](obj) == value) != (operator == "Equals"):
            return False
    return True


def selects(binding: Mapping[str, Any], obj: Obj) -> bool:
    """Whether shell-operator would deliver `obj` to the binding (kind, namespace, name, labels)."""
    unknown = set(binding.get("namespace") or {}) - {"nameSelector"}
    assert not unknown, f"{binding['name']}: selectors not emulated here: {unknown}"
    if binding["apiVersion"] != obj["apiVersion"] or binding["kind"].lower() != obj["kind"].lower():
        return False
    if not _field_selector_matches(binding.get("fieldSelector") or {}, obj):
        return False
    meta = obj["metadata"]
    namespaces = ((binding.get("namespace") or {}).get("nameSelector") or {}).get("matchNames")
    if namespaces is not None and meta.get("namespace") not in namespaces:
        return False
    names = (binding.get("nameSelector") or {}).get("matchNames")
    if names is not None and meta["name"] not in names:
        return False
    return _label_selector_matches(binding.get("labelSelector") or {}, meta.get("labels") or {})


def snapshots_of(name: str, cluster: Sequence[Obj]) -> dict[str, list[dict[str, Any]]]:
    """Every binding's snapshot of `cluster`: the jq output of each object it selects."""
    return {
        binding_name: [
            {"filterResult": run_jq(binding["jqFilter"], obj)} for obj in cluster if selects(binding, obj)
        ]
        for binding_name, binding in kubernetes_bindings(name).items()
    }


def binding_contexts(name: str, snapshots: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One binding context per way the hook runs: beforeHelm or afterDeleteHelm, its schedule, and
    the Synchronization of each binding that runs on it, each with the snapshots addon-operator
    includes."""
    config = hook_config(name)

    def included(names: Sequence[str]) -> dict[str, Any]:
        return {key: copy.deepcopy(snapshots[key]) for key in names}

    contexts: list[dict[str, Any]] = []
    for run in ("beforeHelm", "afterDeleteHelm"):
        if run in config:
            contexts.append({"binding": run, "snapshots": copy.deepcopy(dict(snapshots))})
    for item in config.get("schedule", []):
        snaps = included(item.get("includeSnapshotsFrom", []))
        contexts.append({"binding": item["name"], "type": "Schedule", "snapshots": snaps})
    for binding_name, binding in kubernetes_bindings(name).items():
        if binding.get("executeHookOnSynchronization", True) is False:
            continue
        contexts.append(
            {
                "binding": binding_name,
                "type": "Synchronization",
                "objects": copy.deepcopy(snapshots[binding_name]),
                "snapshots": included(binding.get("includeSnapshotsFrom", [])),
            }
        )
    assert contexts
    return contexts


@dataclasses.dataclass(frozen=True)
class Outcome:
    values: dict[str, Any]  # the module's values after addon-operator applied the patches
    kube: list[dict[str, Any]]
    metrics: list[dict[str, Any]]

    @property
    def internal(self) -> dict[str, Any]:
        result: dict[str, Any] = self.values["aiModels"].get("internal", {})
        return result


def run_hook(kit: Any, name: str, cluster: Sequence[Obj], values: dict[str, Any]) -> list[Outcome]:
    """The hook run on each of its binding contexts, with snapshots built by jq from `cluster`."""
    main = kit.load(name).main
    outcomes = []
    for context in binding_contexts(name, snapshots_of(name, cluster)):
        output = hook.testrun(main, binding_context=[context], initial_values=copy.deepcopy(values))
        outcomes.append(Outcome(kit.patched(values, output), kit.kube(output), list(output.metrics.data)))
    return outcomes


# ----- completeness ------------------------------------------------------------------------------------


def test_every_binding_with_a_jq_filter_has_samples() -> None:
    filtered = {
        (name, binding_name)
        for name in HOOK_NAMES
        for binding_name, binding in kubernetes_bindings(name).items()
        if binding.get("jqFilter")
    }
    assert filtered, "no hook binding has a jqFilter"
    missing = sorted(filtered - {key for key, samples in FILTER_SAMPLES.items() if samples})
    assert not missing, f"add FILTER_SAMPLES for these (hook, binding) pairs: {missing}"
    assert sorted(set(FILTER_SAMPLES) - filtered) == [], "samples for bindings that no longer exist"


def test_every_hook_with_kubernetes_bindings_runs_on_jq_output() -> None:
    with_bindings = {name for name in HOOK_NAMES if kubernetes_bindings(name)}
    assert with_bindings - SCENARIO_HOOKS == set(), "add a scenario that runs the hook on jq output"


# ----- each filter over each sample ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "binding_name", "index"),
    [
        (name, binding, index)
        for (name, binding), samples in FILTER_SAMPLES.items()
        for index in range(len(samples))
    ],
    ids=str,
)
def test_the_filter_gives_the_expected_result_for_a_full_object(
    name: str, binding_name: str, index: int
) -> None:
    binding = kubernetes_bindings(name)[binding_name]
    obj, expected = FILTER_SAMPLES[(name, binding_name)][index]
    assert selects(binding, obj), "the sample is not an object this binding receives"
    assert run_jq(binding["jqFilter"], obj) == expected


def test_filters_keep_neither_managed_fields_nor_last_applied_configuration() -> None:
    """Snapshots live in addon-operator's memory for the module's lifetime: no filter may copy the
    bulky bookkeeping into them (a filter like `.metadata` would)."""
    for (name, binding_name), samples in FILTER_SAMPLES.items():
        expression = kubernetes_bindings(name)[binding_name]["jqFilter"]
        for obj, _ in samples:
            text = json.dumps(run_jq(expression, obj))
            assert "managedFields" not in text
            assert "fieldsV1" not in text
            assert LAST_APPLIED not in text


def test_objects_outside_a_bindings_selectors_are_not_delivered() -> None:
    sources = kubernetes_bindings("artifacts_credentials")["source_secrets"]
    assert not selects(sources, HELM_RELEASE)  # Helm's release Secrets carry owner=helm
    assert not selects(sources, SAME_NAME_ELSEWHERE)
    assert not selects(kubernetes_bindings("artifacts_credentials")["copies"], API_TLS_UNRELATED)
    assert not selects(kubernetes_bindings("artifacts_credentials")["module_namespace"], OTHER_NAMESPACE)


# ----- hooks run on jq output --------------------------------------------------------------------------


def copy_operation(name: str, data: Mapping[str, str]) -> dict[str, Any]:
    return {
        "operation": "CreateOrUpdate",
        "object": {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": "d8-ai-models",
                "labels": {"heritage": "deckhouse", "module": "ai-models"},
            },
            "type": "Opaque",
            "data": dict(data),
        },
    }


def deletion(kind: str, namespace: str, name: str) -> dict[str, Any]:
    return {"operation": "Delete", "kind": kind, "namespace": namespace, "name": name, "apiVersion": "v1"}


def artifacts_values(credentials: str = "ai-models-s3", ca: str | None = "ai-models-s3-ca") -> dict[str, Any]:
    artifacts = {**MINIMAL_SETTINGS["artifacts"], "credentialsSecretName": credentials}
    if ca:
        artifacts["caSecretName"] = ca
    return module_values({"artifacts": artifacts})


def https_values(secret_name: str) -> dict[str, Any]:
    https = {"mode": "CustomCertificate", "customCertificate": {"secretName": secret_name}}
    return module_values({**MINIMAL_SETTINGS, "https": https})


@dataclasses.dataclass(frozen=True)
class Scenario:
    hook: str
    name: str
    cluster: tuple[Obj, ...]
    values: Callable[[], dict[str, Any]]
    check: Callable[[Outcome], None]

    def __str__(self) -> str:
        return f"{self.hook}:{self.name}"


def _kube_is(*expected: dict[str, Any]) -> Callable[[Outcome], None]:
    def check(outcome: Outcome) -> None:
        assert outcome.kube == list(expected)

    return check


def _certificate_is(expected: dict[str, str] | None) -> Callable[[Outcome], None]:
    def check(outcome: Outcome) -> None:
        assert outcome.internal.get("customCertificateData") == expected
        assert outcome.kube == []

    return check


SECRETS_IN_D8_SYSTEM = (
    S3_CREDENTIALS,
    S3_CA,
    S3_PENDING,
    HELM_RELEASE,
    SAME_NAME_ELSEWHERE,
    API_TLS_UNRELATED,
)
CREDENTIALS_DATA = {"accessKey": b64("AKIAEXAMPLE"), "secretKey": b64("wJalrXUtnFEMI/K7MDENG")}
CA_DATA = {"ca.crt": b64("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")}

SCENARIOS = [
    Scenario(
        "artifacts_credentials",
        "the named Secrets are copied with only the keys the module uses",
        (*SECRETS_IN_D8_SYSTEM, MODULE_NAMESPACE_OBJ),
        artifacts_values,
        _kube_is(
            copy_operation("ai-models-artifacts-credentials", CREDENTIALS_DATA),
            copy_operation("ai-models-artifacts-ca", CA_DATA),
        ),
    ),
    Scenario(
        "artifacts_credentials",
        "copies equal to their sources are left alone",
        (*SECRETS_IN_D8_SYSTEM, MODULE_NAMESPACE_OBJ, COPY_CREDENTIALS, COPY_CA),
        artifacts_values,
        _kube_is(),
    ),
    Scenario(
        "artifacts_credentials",
        "a source without data leaves its copy, a copy without a setting is deleted",
        (*SECRETS_IN_D8_SYSTEM, MODULE_NAMESPACE_OBJ, COPY_CREDENTIALS, COPY_CA_WITHOUT_DATA),
        lambda: artifacts_values(credentials="s3-pending", ca=None),
        _kube_is(deletion("Secret", "d8-ai-models", "ai-models-artifacts-ca")),
    ),
    Scenario(
        "artifacts_credentials",
        "first install: nothing is written before Helm has created the module namespace",
        (*SECRETS_IN_D8_SYSTEM, OTHER_NAMESPACE),
        artifacts_values,
        _kube_is(),
    ),
    Scenario(
        "artifacts_credentials",
        "nothing is written into a terminating module namespace",
        (*SECRETS_IN_D8_SYSTEM, MODULE_NAMESPACE_TERMINATING, COPY_CA),
        artifacts_values,
        _kube_is(),
    ),
    Scenario(
        "copy_custom_certificate",
        "the named certificate's TLS keys and CA reach the values",
        (*SECRETS_IN_D8_SYSTEM, CUSTOM_TLS, CUSTOM_TLS_WITHOUT_CA),
        lambda: https_values("ai-models-tls"),
        _certificate_is({"tls.crt": b64(CERT), "tls.key": b64(KEY), "ca.crt": b64(ISSUER)}),
    ),
    Scenario(
        "copy_custom_certificate",
        "a certificate without a CA",
        (*SECRETS_IN_D8_SYSTEM, CUSTOM_TLS, CUSTOM_TLS_WITHOUT_CA),
        lambda: https_values("wildcard-tls"),
        _certificate_is({"tls.crt": b64(CERT), "tls.key": b64(KEY)}),
    ),
    Scenario(
        "copy_custom_certificate",
        "a Secret without data gives no certificate",
        (*SECRETS_IN_D8_SYSTEM, CUSTOM_TLS),
        lambda: https_values("s3-pending"),
        _certificate_is(None),
    ),
]
DISABLED_CLUSTER = (
    DELIVERED_DEPLOYMENT,
    UNLABELLED_DEPLOYMENT,
    CACHE_STATEFUL_SET,
    GATED_DAEMON_SET,
    SHARED_CRON_JOB,
    FINALIZED_MODEL,
    FINALIZED_CLUSTER_MODEL,
    PLAIN_SOURCE,
    FINALIZED_SOURCE,
    GATED_WITH_CLAIM,
    GATED_ONLY,
    RUNNING_POD,
    MATERIALIZE_JOB,
    MATERIALIZE_TOKEN,
    SHARED_CLAIM_OBJ,
    PENDING_CLAIM,
    CACHE_NODE,
    PLAIN_NODE,
    S3_CREDENTIALS,
)


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


def _after_disable(outcome: Outcome) -> None:
    """Each operation applied to the object it names (the JSON patches by a real RFC 6902 engine):
    the delivered workloads end as the user wrote them, the finalizers are gone, the gated Pods are
    ungated or deleted, the materialization is deleted, and the claims are kept."""
    objects = {
        (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o for o in DISABLED_CLUSTER
    }
    deleted = set()
    for operation in outcome.kube:
        key = (operation["kind"], operation["namespace"], operation["name"])
        assert key in objects, operation
        if operation["operation"] == "JSONPatch":
            objects[key] = jsonpatch.apply_patch(objects[key], operation["jsonPatch"])
        elif operation["operation"] == "MergePatch":
            objects[key] = merged(objects[key], operation["mergePatch"])
        else:
            assert operation["operation"] in {"Delete", "DeleteInBackground"}, operation
            deleted.add(key)
    for kind, name in (("Deployment", "web"), ("DaemonSet", "agent")):
        workload = objects[(kind, "team-a", name)]
        assert workload["spec"]["template"] == users_pod_template()
        assert workload["metadata"]["labels"] == {"app": "web"}
    assert objects[("Deployment", "team-a", "web")]["metadata"]["annotations"].keys() == {
        names.MODEL_ANNOTATION,
        LAST_APPLIED,
    }
    assert objects[("StatefulSet", "team-b", "embed")]["spec"]["template"] == users_pod_template()
    cron = objects[("CronJob", "team-a", "nightly")]
    assert cron["spec"]["jobTemplate"]["spec"]["template"] == users_pod_template()
    assert objects[("Deployment", "team-a", "other")] == UNLABELLED_DEPLOYMENT  # not the module's to touch
    assert objects[("Model", "team-a", "qwen")]["metadata"]["finalizers"] == ["example.com/keep"]
    assert objects[("ClusterModel", "", "bge")]["metadata"]["finalizers"] == []
    assert objects[("ModelCatalogSource", "", "hub-2")]["metadata"]["finalizers"] == []
    assert (
        "schedulingGates" not in objects[("Pod", "team-a", "agent-x")]["spec"]
        or not objects[("Pod", "team-a", "agent-x")]["spec"]["schedulingGates"]
    )
    assert deleted == {
        ("Pod", "team-a", "web-5d9c-a"),
        ("Job", "team-a", SHARED_CLAIM),
        ("Secret", "team-a", f"{SHARED_CLAIM}-token"),
    }
    node = objects[("Node", "", "gpu-1")]["metadata"]
    assert node["labels"] == {"kubernetes.io/hostname": "gpu-1"}
    assert names.NODE_CACHE_REPORT_ANNOTATION not in node.get("annotations", {})
    assert objects[("Node", "", "cpu-1")] == PLAIN_NODE
    assert strip(objects[("Pod", "team-a", "web-5d9c-b")]) == strip(RUNNING_POD)  # a running Pod is left


SCENARIOS.append(
    Scenario(
        "disable_cleanup",
        "disabling takes back what the module wrote and keeps the claims",
        DISABLED_CLUSTER,
        module_values,
        _after_disable,
    )
)
SCENARIO_HOOKS = {scenario.hook for scenario in SCENARIOS} | {"internal_tls"}  # see the test below


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_hook_on_jq_output(kit: Any, scenario: Scenario) -> None:
    assert scenario.hook in HOOK_NAMES
    for outcome in run_hook(kit, scenario.hook, scenario.cluster, scenario.values()):
        scenario.check(outcome)


def test_internal_tls_reads_back_the_secrets_the_chart_rendered(kit: Any) -> None:
    """The Secrets rendered from the hook's values, as the API server serves them after Helm
    applied them, give the hook back the same CA and certificate after a Deckhouse restart."""
    internal = run_hook(kit, "internal_tls", [], module_values())[0].internal  # a fresh install
    chart = render_chart(module_values(internal=internal))
    cluster = []
    for name in ("ai-models-root-ca", "ai-models-api-tls", "ai-models-controller-tls"):
        rendered = chart.get("Secret", name, "d8-ai-models")
        meta = rendered["metadata"]
        cluster.append(
            served(
                "v1",
                "Secret",
                name,
                namespace=meta["namespace"],
                labels=meta.get("labels"),
                annotations={**(meta.get("annotations") or {}), **HELM["annotations"]},
                manager="helm",
                **{
                    key: value
                    for key, value in rendered.items()
                    if key not in {"apiVersion", "kind", "metadata"}
                },
            )
        )
    for outcome in run_hook(kit, "internal_tls", cluster, module_values()):
        assert outcome.internal == internal
