"""The controller and api processes as rendered: the process contract (command, settings env,
ports, probes), their identities and least-privilege RBAC, metrics through kube-rbac-proxy, and
the PDB / VPA / Service / ServiceMonitor around them, per value scenario where it matters.

Expectations are written from the module settings and the process contract, never read back from
the templates, so a template that drifts from the contract fails here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from functools import cache
from typing import Any

import helm_python
import pytest
import yaml

from ai_models.settings import Settings, parse_quantity
from support.egress import expected_proxy_env
from support.probe import ProbeChart
from support.render import RenderedChart
from support.scenarios import load_scenarios, scenario
from support.values import module_values

NAMESPACE = "d8-ai-models"
CONTROLLER = "ai-models-controller"
API = "ai-models-api"
DEPLOYMENTS = (CONTROLLER, API)
# Deployment -> (main container, its ServiceAccount). DMT names a ServiceAccount of
# templates/<dir>/rbac-for-us.yaml in the module namespace after <dir>.
PROCESSES = {CONTROLLER: ("controller", "controller"), API: ("api", "api")}
OWN_TEMPLATES = (
    "templates/controller/",
    "templates/api/",
    "templates/publisher/",
    "templates/materializer/",
    "templates/rbac-to-us.yaml",
)
SCENARIOS = load_scenarios()
DIGESTS = module_values()["global"]["modulesImages"]["digests"]

CA_DIR = "/etc/ai-models/artifacts-ca"
CREDENTIALS_SECRET = "ai-models-artifacts-credentials"
INDEX_DIR = "/var/lib/ai-models/index"
KUBE_RBAC_PROXY_CA = "kube-rbac-proxy-ca.crt"
LOG_EPHEMERAL_STORAGE = 50 * 2**20


# ----- rendering and lookups -----------------------------------------------------------------------


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def own_objects(chart: RenderedChart) -> list[tuple[str, dict[str, Any]]]:
    """(template path, object) of everything this issue's templates render."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(chart.files):
        relative = path.split("/", 1)[1]
        if relative.startswith(OWN_TEMPLATES) and relative.endswith(".yaml"):
            found.extend((relative, doc) for doc in yaml.safe_load_all(chart.files[path]) if doc)
    return found


def pod_spec(chart: RenderedChart, deployment: str) -> dict[str, Any]:
    spec: dict[str, Any] = chart.get("Deployment", deployment, NAMESPACE)["spec"]["template"]["spec"]
    return spec


def container(chart: RenderedChart, deployment: str, name: str) -> dict[str, Any]:
    for candidate in pod_spec(chart, deployment)["containers"]:
        if candidate["name"] == name:
            found: dict[str, Any] = candidate
            return found
    raise KeyError(f"{deployment} has no container {name}")


def env_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """Env by name: the literal value, or the valueFrom source."""
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in item.get("env") or []}


def volume(chart: RenderedChart, deployment: str, name: str) -> dict[str, Any]:
    for candidate in pod_spec(chart, deployment).get("volumes") or []:
        if candidate["name"] == name:
            found: dict[str, Any] = candidate
            return found
    raise KeyError(f"{deployment} has no volume {name}")


_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{suffix: Decimal(1000) ** power for power, suffix in enumerate(("k", "M", "G", "T"), 1)},
    **{suffix: Decimal(1024) ** power for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti"), 1)},
}


def quantity(text: str | int) -> Decimal:
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    assert match, f"not a quantity: {text!r}"
    return Decimal(match[1]) * _SUFFIXES[match[2]]


def rule_set(rules: Iterable[Mapping[str, Any]]) -> set[tuple[tuple[str, ...], ...]]:
    """RBAC rules as comparable tuples (order of rules and of list items does not matter)."""
    return {
        tuple(
            tuple(sorted(rule.get(key) or [])) for key in ("apiGroups", "resources", "resourceNames", "verbs")
        )
        for rule in rules
    }


def rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> Any:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, "resourceNames": names or []}


def ha_replicas(name: str) -> int:
    return {"ha-module-setting": 2, "ha-global-discovery": 2}.get(name, 1)


# ----- what the contract says ----------------------------------------------------------------------


def expected_common_env(values: Mapping[str, Any]) -> dict[str, Any]:
    settings = values["aiModels"]
    artifacts = settings["artifacts"]
    env: dict[str, Any] = {
        "AI_MODELS_LOG_LEVEL": settings["logLevel"],
        "AI_MODELS_LOG_FORMAT": "json",
        "AI_MODELS_STORE_URL": f"s3://{artifacts['bucket']}",
        "AI_MODELS_S3_ENDPOINT": artifacts["endpoint"],
        "AI_MODELS_S3_REGION": artifacts["region"],
        "AI_MODELS_S3_USE_PATH_STYLE": str(artifacts["usePathStyle"]).lower(),
        "AI_MODELS_S3_INSECURE": str(artifacts["insecure"]).lower(),
        "AI_MODELS_HF_ENDPOINT": settings["sources"]["huggingFace"]["endpoint"],
        "AI_MODELS_SOURCES_ALLOW_LINK_LOCAL_ENDPOINTS": str(
            settings["sources"]["allowLinkLocalEndpoints"]
        ).lower(),
        "AI_MODELS_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "AI_MODELS_POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
        "AWS_ACCESS_KEY_ID": {"secretKeyRef": {"name": CREDENTIALS_SECRET, "key": "accessKey"}},
        "AWS_SECRET_ACCESS_KEY": {"secretKeyRef": {"name": CREDENTIALS_SECRET, "key": "secretKey"}},
    }
    if artifacts.get("caSecretName"):
        env["AI_MODELS_S3_CA_FILE"] = f"{CA_DIR}/ca.crt"
    if artifacts.get("capacityLimit"):
        env["AI_MODELS_CAPACITY_LIMIT_BYTES"] = artifacts["capacityLimit"]
    # The cluster's egress proxy, if it has one (tests/render/test_proxy.py).
    env.update(expected_proxy_env(values))
    return env


def expected_controller_env(values: Mapping[str, Any]) -> dict[str, Any]:
    delivery = values["aiModels"]["delivery"]
    env: dict[str, Any] = {
        "AI_MODELS_CONTROLLER_LEASE_NAME": CONTROLLER,
        "AI_MODELS_DELIVERY_MODE": delivery["mode"],
        "AI_MODELS_DELIVERY_NODE_CACHE_SIZE": delivery["nodeCache"]["size"],
        "AI_MODELS_DELIVERY_NODE_CACHE_SELECTOR": json.dumps(
            delivery["nodeCache"]["nodeSelector"], separators=(",", ":")
        ),
        "AI_MODELS_DELIVERY_MAX_CONCURRENT_MATERIALIZATIONS": str(delivery["maxConcurrentMaterializations"]),
        "AI_MODELS_DELIVERY_PROVISIONING_TIMEOUT": delivery["provisioningTimeout"],
        "AI_MODELS_DELIVERY_MATERIALIZER_TEMPLATE_FILE": "/etc/ai-models/materializer/template.yaml",
        # The api's internal TLS port, verified with the module CA (D159).
        "AI_MODELS_DELIVERY_API_URL": f"https://ai-models-api.{NAMESPACE}.svc",
        "AI_MODELS_DELIVERY_API_CA_FILE": "/etc/ai-models/module-ca/ca.crt",
    }
    # The pull secret always renders (D129), so the Jobs get its copy, unless they pull from a
    # mirror (delivery.materializer.imageRepository, D162).
    if not (delivery.get("materializer") or {}).get("imageRepository"):
        env["AI_MODELS_DELIVERY_REGISTRY_SECRET"] = "ai-models-module-registry"
    if values["aiModels"]["internal"]["controllerCert"].get("crt"):
        env["AI_MODELS_CONTROLLER_WEBHOOK_CERT_DIR"] = "/etc/ai-models/webhook-tls"
        env["AI_MODELS_CONTROLLER_WEBHOOK_PORT"] = "9443"
    if delivery.get("sharedPVCStorageClassName"):
        env["AI_MODELS_DELIVERY_SHARED_PVC_STORAGE_CLASS"] = delivery["sharedPVCStorageClassName"]
    if values["global"].get("defaultClusterStorageClass"):
        env["AI_MODELS_DELIVERY_GLOBAL_STORAGE_CLASS"] = values["global"]["defaultClusterStorageClass"]
    env["AI_MODELS_PUBLISH_POD_TEMPLATE_FILE"] = "/etc/ai-models/publisher/template.yaml"
    env["AI_MODELS_PUBLICATION_MAX_CONCURRENT"] = str(
        values["aiModels"]["publication"]["maxConcurrentPublications"]
    )
    env["AI_MODELS_UPLOAD_IN_CLUSTER_URL"] = f"http://ai-models-api.{NAMESPACE}.svc"
    modules = values["global"].get("modules") or {}
    https = values["aiModels"].get("https") or {}
    mode = https.get("mode") or (modules.get("https") or {}).get("mode")
    if modules.get("publicDomainTemplate"):
        scheme = "http" if mode == "Disabled" else "https"
        host = modules["publicDomainTemplate"].replace("%s", "ai-models")
        env["AI_MODELS_UPLOAD_PUBLIC_URL"] = f"{scheme}://{host}"
    return env


PROCESS_ENV: dict[str, dict[str, Any]] = {
    CONTROLLER: {},
    API: {
        "AI_MODELS_API_PORT": "8000",
        "AI_MODELS_API_INDEX_DIR": INDEX_DIR,
        "AI_MODELS_MEMORY_LIMIT_BYTES": {
            "resourceFieldRef": {"containerName": "api", "resource": "limits.memory"}
        },
    },
}

# Only once the internal TLS hook has issued the api's certificate (see test_api_internal_listener).
API_INTERNAL_LISTENER_ENV = {
    "AI_MODELS_API_INTERNAL_PORT": "9443",
    "AI_MODELS_API_TLS_CERT_FILE": "/etc/ai-models/api-tls/tls.crt",
    "AI_MODELS_API_TLS_KEY_FILE": "/etc/ai-models/api-tls/tls.key",
}

# Workload delivery in both modes (D93, issue 13).
CONTROLLER_DELIVERY_RULES = [
    rule(["apps"], ["deployments", "statefulsets", "daemonsets"], ["get", "list", "watch", "patch"]),
    rule(["batch"], ["cronjobs"], ["get", "list", "watch", "patch"]),
    rule([""], ["pods"], ["list", "patch"]),
    # A delivered Deployment's stale ReplicaSet, deleted once the new one is available (D95).
    rule(["apps"], ["replicasets"], ["list", "delete"]),
]
# SharedPVC mode only (the default): the storage-prerequisites check's claims and events, and what
# SharedPVC delivery makes beside each workload (D93).
CONTROLLER_SHARED_PVC_ONLY_RULES = [
    rule([""], ["persistentvolumeclaims", "events"], ["list"]),
    # delete: a claim its workload no longer uses, after the grace period (D100).
    rule([""], ["persistentvolumeclaims"], ["get", "watch", "create", "patch", "delete"]),
    rule([""], ["persistentvolumes"], ["get", "list", "watch"]),
    rule(["batch"], ["jobs"], ["get", "list", "watch", "create", "delete"]),
    rule([""], ["secrets"], ["create", "update"]),
]
CONTROLLER_CLUSTER_RULES = [
    rule(["ai.deckhouse.io"], ["modelcatalogsources"], ["get", "list", "watch", "patch", "update"]),
    rule(["ai.deckhouse.io"], ["modelcatalogsources/status"], ["get", "patch", "update"]),
    rule(["ai.deckhouse.io"], ["models", "clustermodels"], ["get", "list", "watch", "patch"]),
    rule(["ai.deckhouse.io"], ["models/status", "clustermodels/status"], ["get", "patch"]),
    # No Secret is read cluster-wide (D160): a user's Secret only through a grant naming it.
    rule([""], ["events"], ["create", "patch"]),
    # The storage-prerequisites check; SharedPVC (the default mode) reads shared claims and events.
    rule(["storage.k8s.io"], ["storageclasses"], ["list"]),
    *CONTROLLER_DELIVERY_RULES,
    *CONTROLLER_SHARED_PVC_ONLY_RULES,
]
# NodeCache mode reads nodes (prerequisites, readiness labels, cache reports) and only takes back
# the shared claims an earlier SharedPVC delivery made (D100) or whose workload is gone: the orphan
# pass lists the Jobs of such a claim's namespace (D152).
CONTROLLER_NODE_CACHE_ONLY_RULES = [
    rule([""], ["nodes"], ["get", "list", "watch"]),
    rule([""], ["persistentvolumeclaims"], ["list", "watch", "patch", "delete"]),
    rule(["batch"], ["jobs"], ["list"]),
]
CONTROLLER_NAMESPACE_RULES = [
    rule(["coordination.k8s.io"], ["leases"], ["create"]),
    rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [CONTROLLER]),
    # Secrets by name where the chart knows it (D122): the ledger (its informer watches it by name),
    # the signing keys and the pull secret; create, and update/delete of the publication tokens
    # (named after object UIDs), cannot be narrowed.
    rule([""], ["secrets"], ["get", "list", "watch", "patch"], ["ai-models-storage-accounting"]),
    rule(
        [""],
        ["secrets"],
        ["get"],
        ["ai-models-upload-signing", "ai-models-delivery-signing", "ai-models-module-registry"],
    ),
    rule([""], ["secrets"], ["create", "update", "delete"]),
    rule(["batch"], ["jobs"], ["get", "list", "watch", "create", "delete"]),
    rule([""], ["pods"], ["list"]),
]
API_CLUSTER_RULES = [
    rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
    rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
    rule(["ai.deckhouse.io"], ["models"], ["get"]),
    # ClusterModels also listed: the serving API's listing of the Ready ones (AIModels sources).
    rule(["ai.deckhouse.io"], ["clustermodels"], ["get", "list"]),
]
API_NAMESPACE_RULES = [
    rule(
        [""],
        ["secrets"],
        ["get"],
        ["ai-models-storage-accounting", "ai-models-upload-signing", "ai-models-delivery-signing"],
    ),
    rule([""], ["secrets"], ["patch"], ["ai-models-storage-accounting"]),
    # The first upload on an empty ledger creates its Secret; create cannot be limited by name.
    rule([""], ["secrets"], ["create"]),
]
# Deckhouse's ClusterRole with TokenReview/SubjectAccessReview create for kube-rbac-proxy sidecars.
DECKHOUSE_RBAC_PROXY_ROLE = "d8:rbac-proxy"


# ----- inventory ---------------------------------------------------------------------------------


def test_minimal_cluster_renders_exactly_these_objects() -> None:
    inventory = sorted(
        (path, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        for path, obj in own_objects(rendered("minimal"))
    )
    expected = []
    for directory, deployment, account in (("controller", CONTROLLER, "controller"), ("api", API, "api")):
        rbac = f"templates/{directory}/rbac-for-us.yaml"
        expected += [
            (f"templates/{directory}/deployment.yaml", "Deployment", NAMESPACE, deployment),
            (f"templates/{directory}/pdb.yaml", "PodDisruptionBudget", NAMESPACE, deployment),
            (f"templates/{directory}/vpa.yaml", "VerticalPodAutoscaler", NAMESPACE, deployment),
            (f"templates/{directory}/service.yaml", "Service", NAMESPACE, deployment),
            (f"templates/{directory}/servicemonitor.yaml", "ServiceMonitor", "d8-monitoring", deployment),
            (rbac, "ServiceAccount", NAMESPACE, account),
            (rbac, "ClusterRole", "", f"d8:ai-models:{directory}"),
            (rbac, "ClusterRoleBinding", "", f"d8:ai-models:{directory}"),
            (rbac, "ClusterRoleBinding", "", f"d8:ai-models:{directory}:rbac-proxy"),
            (rbac, "Role", NAMESPACE, account),
            (rbac, "RoleBinding", NAMESPACE, account),
        ]
    expected += [
        ("templates/rbac-to-us.yaml", kind, NAMESPACE, "access-to-ai-models-prometheus-metrics")
        for kind in ("Role", "RoleBinding")
    ]
    expected += [
        ("templates/publisher/pod-template.yaml", "ConfigMap", NAMESPACE, "ai-models-publisher-template"),
        (
            "templates/materializer/pod-template.yaml",
            "ConfigMap",
            NAMESPACE,
            "ai-models-materializer-template",
        ),
        ("templates/publisher/rbac-for-us.yaml", "ServiceAccount", NAMESPACE, "publisher"),
        ("templates/publisher/rbac-for-us.yaml", "ClusterRole", "", "d8:ai-models:publisher"),
        ("templates/publisher/rbac-for-us.yaml", "ClusterRoleBinding", "", "d8:ai-models:publisher"),
    ]
    expected += [
        ("templates/controller/admission-policies.yaml", kind, "", "ai-models-controller-secrets")
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert inventory == sorted(expected)


# ----- process contract ----------------------------------------------------------------------------


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_one_module_image_runs_the_sub_command(deployment: str) -> None:
    name, _ = PROCESSES[deployment]
    main = container(rendered("minimal"), deployment, name)
    assert (
        main["image"] == f"registry.example.com/deckhouse/modules/ai-models@{DIGESTS['aiModels']['aiModels']}"
    )
    assert main["command"] == ["ai-models"]
    assert main["args"] == [name]


@pytest.mark.parametrize("item", SCENARIOS, ids=lambda item: item.name)
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_settings_reach_the_process_as_env(item: Any, deployment: str) -> None:
    name, _ = PROCESSES[deployment]
    env = env_of(container(rendered(item.name), deployment, name))
    own = expected_controller_env(item.values()) if deployment == CONTROLLER else PROCESS_ENV[deployment]
    if deployment == API and item.values()["aiModels"]["internal"]["apiCert"].get("crt"):
        own = own | API_INTERNAL_LISTENER_ENV
    assert env == expected_common_env(item.values()) | own


def test_the_scenarios_cover_each_optional_setting_both_ways() -> None:
    envs = [env_of(container(rendered(item.name), API, "api")) for item in SCENARIOS]
    for variable in ("AI_MODELS_S3_CA_FILE", "AI_MODELS_CAPACITY_LIMIT_BYTES"):
        assert any(variable in env for env in envs)
        assert any(variable not in env for env in envs)
    for variable in ("AI_MODELS_S3_USE_PATH_STYLE", "AI_MODELS_S3_INSECURE"):
        assert {env[variable] for env in envs} == {"true", "false"}
    capacity = env_of(container(rendered("artifacts-private-ca"), CONTROLLER, "controller"))
    assert capacity["AI_MODELS_CAPACITY_LIMIT_BYTES"] == "500Gi"
    assert "AI_MODELS_CAPACITY_LIMIT_BYTES" not in env_of(
        container(rendered("minimal"), CONTROLLER, "controller")
    )


@pytest.mark.parametrize("name", ["minimal", "artifacts-private-ca", "artifacts-insecure-endpoint"])
def test_the_shared_env_is_what_the_process_settings_read(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_of(container(rendered(name), API, "api"))
    literal = {key: value for key, value in env.items() if isinstance(value, str)}
    fields = {f"AI_MODELS_{field.upper()}" for field in Settings.model_fields}
    shared = set(expected_common_env(scenario(name).values())) - {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }
    assert shared <= fields, f"env the shared settings do not read: {sorted(shared - fields)}"
    for key in list(os.environ):
        if key.startswith("AI_MODELS_"):
            monkeypatch.delenv(key)
    for key, value in literal.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AI_MODELS_NAMESPACE", NAMESPACE)
    settings = Settings()
    artifacts = scenario(name).values()["aiModels"]["artifacts"]
    assert settings.store_url == f"s3://{artifacts['bucket']}"
    assert settings.s3_use_path_style is artifacts["usePathStyle"]
    assert settings.s3_insecure is artifacts["insecure"]
    limit = artifacts.get("capacityLimit")
    assert settings.capacity_limit_bytes == (parse_quantity(limit) if limit else None)
    assert settings.s3_ca_file == (f"{CA_DIR}/ca.crt" if artifacts.get("caSecretName") else None)


@pytest.mark.parametrize("name", ["minimal", "artifacts-private-ca"])
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_the_object_store_ca_is_mounted_only_when_set(name: str, deployment: str) -> None:
    chart = rendered(name)
    main = container(chart, deployment, PROCESSES[deployment][0])
    mounts = {mount["name"]: mount for mount in main.get("volumeMounts") or []}
    volumes = {item["name"] for item in pod_spec(chart, deployment)["volumes"]}
    if not scenario(name).values()["aiModels"]["artifacts"].get("caSecretName"):
        assert "artifacts-ca" not in mounts
        assert "artifacts-ca" not in volumes
        return
    assert mounts["artifacts-ca"] == {"name": "artifacts-ca", "mountPath": CA_DIR, "readOnly": True}
    assert volume(chart, deployment, "artifacts-ca")["secret"] == {
        "secretName": "ai-models-artifacts-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert env_of(main)["AI_MODELS_S3_CA_FILE"] == f"{CA_DIR}/ca.crt"


def test_the_api_keeps_its_index_in_a_bounded_empty_dir() -> None:
    chart = rendered("minimal")
    main = container(chart, API, "api")
    mounts = {mount["name"]: mount["mountPath"] for mount in main["volumeMounts"]}
    assert mounts["index"] == env_of(main)["AI_MODELS_API_INDEX_DIR"] == INDEX_DIR
    assert volume(chart, API, "index") == {"name": "index", "emptyDir": {"sizeLimit": "2Gi"}}
    assert main["resources"]["limits"]["memory"] == "1Gi"


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_pods_run_restricted_with_a_read_only_root_and_a_bounded_tmp(deployment: str) -> None:
    chart = rendered("minimal")
    spec = pod_spec(chart, deployment)
    assert spec["serviceAccountName"] == PROCESSES[deployment][1]
    assert spec["automountServiceAccountToken"] is True
    # A Service named ai-models-api would otherwise inject AI_MODELS_API_PORT=tcp://... into both.
    assert spec["enableServiceLinks"] is False
    assert spec["priorityClassName"] == "cluster-medium"
    main = container(chart, deployment, PROCESSES[deployment][0])
    assert {"name": "tmp", "mountPath": "/tmp"} in main["volumeMounts"]
    assert quantity(volume(chart, deployment, "tmp")["emptyDir"]["sizeLimit"]) > 0
    for item in spec["containers"]:
        assert item["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_ephemeral_storage_requests_cover_logs_and_every_empty_dir(deployment: str) -> None:
    chart = rendered("minimal")
    limits = {
        item["name"]: quantity(item["emptyDir"]["sizeLimit"])
        for item in pod_spec(chart, deployment)["volumes"]
        if "emptyDir" in item
    }
    for item in pod_spec(chart, deployment)["containers"]:
        scratch = sum(
            (limits.get(mount["name"], Decimal(0)) for mount in item.get("volumeMounts") or []), Decimal(0)
        )
        requested = quantity(item["resources"]["requests"]["ephemeral-storage"])
        assert requested >= scratch + LOG_EPHEMERAL_STORAGE, item["name"]


# ----- ports and probes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deployment", "port_name", "port", "ready_path"),
    [(CONTROLLER, "http-health", 8081, "/readyz"), (API, "http", 8000, "/readyz")],
)
def test_ports_and_probes_of_the_processes(
    deployment: str, port_name: str, port: int, ready_path: str
) -> None:
    main = container(rendered("minimal"), deployment, PROCESSES[deployment][0])
    assert main["ports"] == [{"name": port_name, "containerPort": port, "protocol": "TCP"}]
    startup, liveness, readiness = main["startupProbe"], main["livenessProbe"], main["readinessProbe"]
    assert startup["httpGet"] == {"path": "/healthz", "port": port_name}
    # The process retries the API server with backoff at start: a minute at least before a restart.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60
    assert liveness["httpGet"] == {"path": "/healthz", "port": port_name}
    assert readiness["httpGet"] == {"path": ready_path, "port": port_name}


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_kube_rbac_proxy_fronts_the_local_metrics_for_the_deployment(deployment: str) -> None:
    chart = rendered("minimal")
    proxy = container(chart, deployment, "kube-rbac-proxy")
    assert proxy["image"] == f"registry.deckhouse.io/deckhouse/ce@{DIGESTS['common']['kubeRbacProxy']}"
    assert proxy["ports"] == [{"name": "https-metrics", "containerPort": 8443, "protocol": "TCP"}]
    env = env_of(proxy)
    assert env["KUBE_RBAC_PROXY_LISTEN_ADDRESS"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert yaml.safe_load(env["KUBE_RBAC_PROXY_CONFIG"]) == {
        "upstreams": [
            {
                "upstream": "http://127.0.0.1:8080/",
                "path": "/",
                "authorization": {
                    "resourceAttributes": {
                        "namespace": NAMESPACE,
                        "apiGroup": "apps",
                        "apiVersion": "v1",
                        "resource": "deployments",
                        "subresource": "prometheus-metrics",
                        "name": deployment,
                    }
                },
            }
        ]
    }
    assert "--secure-listen-address=$(KUBE_RBAC_PROXY_LISTEN_ADDRESS):8443" in proxy["args"]
    assert "--livez-path=/livez" in proxy["args"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert proxy[probe]["httpGet"] == {"path": "/livez", "port": "https-metrics", "scheme": "HTTPS"}
    # The client CA Prometheus is verified with comes from the ConfigMap Deckhouse publishes.
    (ca_file,) = [arg.split("=", 1)[1] for arg in proxy["args"] if arg.startswith("--client-ca-file=")]
    (mount,) = proxy["volumeMounts"]
    assert ca_file == f"{mount['mountPath']}/ca.crt"
    assert mount["readOnly"] is True
    assert volume(chart, deployment, mount["name"])["configMap"] == {"name": KUBE_RBAC_PROXY_CA}
    published = rendered("kube-rbac-proxy-ca").get("ConfigMap", KUBE_RBAC_PROXY_CA, NAMESPACE)
    assert "ca.crt" in published["data"]


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_services_target_named_ports_of_the_pods_they_select(deployment: str) -> None:
    chart = rendered("minimal")
    service = chart.get("Service", deployment, NAMESPACE)
    pod_labels = chart.get("Deployment", deployment, NAMESPACE)["spec"]["template"]["metadata"]["labels"]
    selected = [
        obj["metadata"]["name"]
        for obj in chart.of_kind("Deployment")
        if service["spec"]["selector"].items() <= obj["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert selected == [deployment]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    named = {
        port["name"]: port
        for item in pod_spec(chart, deployment)["containers"]
        for port in item.get("ports") or []
    }
    expected = {"https-metrics": 8443} | ({"http": 80} if deployment == API else {})
    assert {port["name"]: port["port"] for port in service["spec"]["ports"]} == expected
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in named, f"{port['name']} targets no named container port"
        assert port["targetPort"] == port["name"]


# ----- high availability, disruption, autoscaling --------------------------------------------------


@pytest.mark.parametrize(
    "name", ["minimal", "ha-module-setting", "ha-global-discovery", "ha-module-overrides-global"]
)
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_replicas_and_anti_affinity_follow_high_availability(name: str, deployment: str) -> None:
    workload = rendered(name).get("Deployment", deployment, NAMESPACE)
    spec = workload["spec"]
    pod = spec["template"]
    assert spec["replicas"] == ha_replicas(name)
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    if ha_replicas(name) == 1:
        assert "affinity" not in pod["spec"]
        return
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    # Never more pods than replicas, so required anti-affinity cannot block a rollout.
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_only_the_controller_is_leader_elected() -> None:
    chart = rendered("ha-module-setting")
    assert env_of(container(chart, CONTROLLER, "controller"))["AI_MODELS_CONTROLLER_LEASE_NAME"] == CONTROLLER
    assert not any("LEASE" in key for key in env_of(container(chart, API, "api")))
    # The Lease the controller may update is the one it is told to hold.
    role = chart.get("Role", "controller", NAMESPACE)
    lease_rules = [item for item in role["rules"] if item.get("resourceNames")]
    assert lease_rules[0]["resourceNames"] == [CONTROLLER]


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_pod_disruption_budgets_select_the_pods(deployment: str) -> None:
    chart = rendered("ha-module-setting")
    pdb = chart.get("PodDisruptionBudget", deployment, NAMESPACE)
    labels = chart.get("Deployment", deployment, NAMESPACE)["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize(("name", "mode"), [("minimal", "InPlaceOrRecreate"), ("old-kubernetes", "Recreate")])
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_vpa_covers_every_container_within_sane_bounds(name: str, mode: str, deployment: str) -> None:
    chart = rendered(name)
    vpa = chart.get("VerticalPodAutoscaler", deployment, NAMESPACE)
    assert vpa["spec"]["targetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment}
    assert vpa["spec"]["updatePolicy"] == {"updateMode": mode}
    policies = {
        policy["containerName"]: policy for policy in vpa["spec"]["resourcePolicy"]["containerPolicies"]
    }
    containers = {item["name"]: item for item in pod_spec(chart, deployment)["containers"]}
    assert set(policies) == set(containers)
    for cname, policy in policies.items():
        requests = containers[cname]["resources"]["requests"]
        for resource in ("cpu", "memory"):
            low, high = quantity(policy["minAllowed"][resource]), quantity(policy["maxAllowed"][resource])
            assert 0 < low <= quantity(requests[resource]) <= high, f"{cname} {resource}"
    # The process sizes its caches from its memory limit once at start: VPA moves requests only and
    # never past the limit.
    main = PROCESSES[deployment][0]
    assert policies[main]["controlledValues"] == "RequestsOnly"
    limit = containers[main]["resources"]["limits"]["memory"]
    assert quantity(policies[main]["maxAllowed"]["memory"]) == quantity(limit)


def test_vpas_need_the_vpa_api() -> None:
    absent = rendered("vpa-absent")
    assert absent.of_kind("VerticalPodAutoscaler") == []
    served = dataclasses.replace(
        scenario("vpa-absent"), api_versions=("autoscaling.k8s.io/v1/VerticalPodAutoscaler",)
    ).render()
    assert {vpa["metadata"]["name"] for vpa in served.of_kind("VerticalPodAutoscaler")} == set(DEPLOYMENTS)


# ----- monitoring ----------------------------------------------------------------------------------


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_service_monitors_scrape_the_proxy_with_the_prometheus_token(deployment: str) -> None:
    chart = rendered("minimal")
    monitor = chart.get("ServiceMonitor", deployment, "d8-monitoring")
    assert monitor["metadata"]["labels"]["prometheus"] == "main"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    selected = [
        service["metadata"]["name"]
        for service in chart.of_kind("Service")
        if service["metadata"]["namespace"] == NAMESPACE
        and spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    ]
    assert selected == [deployment]
    (endpoint,) = spec["endpoints"]
    service_ports = {port["name"] for port in chart.get("Service", deployment, NAMESPACE)["spec"]["ports"]}
    assert endpoint["port"] == "https-metrics"
    assert endpoint["port"] in service_ports
    assert endpoint["scheme"] == "https"
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenSecret"] == {"name": "prometheus-token", "key": "token"}
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    relabel = {item["targetLabel"]: item.get("replacement") for item in endpoint["relabelings"]}
    assert relabel["job"] == deployment
    assert relabel["tier"] == "cluster"
    assert relabel["d8_source"] == "dkp"  # DMT monitor-source-label


def test_service_monitors_need_the_monitoring_api() -> None:
    assert rendered("monitoring-crds-absent").of_kind("ServiceMonitor") == []
    served = dataclasses.replace(
        scenario("monitoring-crds-absent"), api_versions=("monitoring.coreos.com/v1/ServiceMonitor",)
    ).render()
    assert {monitor["metadata"]["name"] for monitor in served.of_kind("ServiceMonitor")} == set(DEPLOYMENTS)


def test_prometheus_may_read_the_metrics_of_exactly_the_proxied_deployments() -> None:
    chart = rendered("minimal")
    role = chart.get("Role", "access-to-ai-models-prometheus-metrics", NAMESPACE)
    proxied = set()
    for deployment in DEPLOYMENTS:
        config = yaml.safe_load(
            env_of(container(chart, deployment, "kube-rbac-proxy"))["KUBE_RBAC_PROXY_CONFIG"]
        )
        attributes = config["upstreams"][0]["authorization"]["resourceAttributes"]
        proxied.add(attributes["name"])
    assert rule_set(role["rules"]) == rule_set(
        [rule(["apps"], ["deployments/prometheus-metrics"], ["get"], sorted(proxied))]
    )
    binding = chart.get("RoleBinding", "access-to-ai-models-prometheus-metrics", NAMESPACE)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "access-to-ai-models-prometheus-metrics",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus", "namespace": "d8-monitoring"}
    ]


# ----- identities and least privilege --------------------------------------------------------------


def granted(chart: RenderedChart, account: str) -> tuple[set[Any], set[Any], set[str]]:
    """Cluster rules, module-namespace rules and foreign ClusterRoles bound to a ServiceAccount."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    cluster: set[Any] = set()
    namespaced: set[Any] = set()
    foreign: set[str] = set()
    for binding in chart.of_kind("ClusterRoleBinding") + chart.of_kind("RoleBinding"):
        if subject not in (binding.get("subjects") or []):
            continue
        ref = binding["roleRef"]
        try:
            role = chart.get(ref["kind"], ref["name"], binding["metadata"].get("namespace"))
        except KeyError:
            assert ref["kind"] == "ClusterRole", f"{binding['metadata']['name']} binds a missing {ref}"
            foreign.add(ref["name"])
            continue
        target = namespaced if binding["kind"] == "RoleBinding" else cluster
        target |= rule_set(role["rules"])
    return cluster, namespaced, foreign


@pytest.mark.parametrize(
    ("account", "cluster_rules", "namespace_rules"),
    [
        ("controller", CONTROLLER_CLUSTER_RULES, CONTROLLER_NAMESPACE_RULES),
        ("api", API_CLUSTER_RULES, API_NAMESPACE_RULES),
    ],
)
def test_each_process_gets_exactly_its_rules(
    account: str, cluster_rules: list[Any], namespace_rules: list[Any]
) -> None:
    cluster, namespaced, foreign = granted(rendered("minimal"), account)
    assert cluster == rule_set(cluster_rules)
    assert namespaced == rule_set(namespace_rules)
    # The kube-rbac-proxy sidecar's TokenReview/SubjectAccessReview come from Deckhouse's own role.
    assert foreign == {DECKHOUSE_RBAC_PROXY_ROLE}


def test_the_controller_reads_nodes_not_claims_in_node_cache_mode() -> None:
    cluster, _, _ = granted(rendered("delivery-node-cache"), "controller")
    shared_pvc_only = rule_set(CONTROLLER_SHARED_PVC_ONLY_RULES)
    assert cluster == (rule_set(CONTROLLER_CLUSTER_RULES) - shared_pvc_only) | rule_set(
        CONTROLLER_NODE_CACHE_ONLY_RULES
    )


def test_rbac_follows_the_dmt_placement_and_naming_rules() -> None:
    chart = rendered("minimal")
    accounts = {
        (obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in chart.of_kind("ServiceAccount")
    }
    for path, obj in own_objects(chart):
        kind, name = obj["kind"], obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace")
        if kind in {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}:
            for item in obj.get("rules") or []:
                for key in ("apiGroups", "resources", "verbs"):
                    assert "*" not in item.get(key, []), f"{name}: wildcard in {key}"
            for subject in obj.get("subjects") or []:
                where = (subject["namespace"], subject["name"])
                assert where in accounts or where == ("d8-monitoring", "prometheus"), f"{name} binds {where}"
        if path == "templates/rbac-to-us.yaml":
            assert name.startswith("access-to-ai-models-")
            assert namespace == NAMESPACE
            continue
        if not path.endswith("/rbac-for-us.yaml"):
            assert kind not in {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
            continue
        directory = path.removeprefix("templates/").removesuffix("/rbac-for-us.yaml")
        if kind == "ServiceAccount":
            assert (namespace, name) == (NAMESPACE, directory)
        elif kind in {"Role", "RoleBinding"}:
            assert name.startswith(directory)
            assert namespace == NAMESPACE
        else:
            assert name.startswith(f"d8:ai-models:{directory}")
            assert namespace is None


def test_service_accounts_do_not_hand_tokens_to_other_pods() -> None:
    for account in ("controller", "api"):
        assert (
            rendered("minimal").get("ServiceAccount", account, NAMESPACE)["automountServiceAccountToken"]
            is False
        )


# ----- helpers added for these templates -----------------------------------------------------------


def test_kube_rbac_proxy_sidecar_can_front_other_workload_kinds(probe_chart: ProbeChart) -> None:
    (sidecar,) = probe_chart.evaluate_yaml(
        '{{ include "ai_models.kube_rbac_proxy_container" (list . "daemonsets" "ai-models-node-cache") }}'
    )
    config = yaml.safe_load(env_of(sidecar)["KUBE_RBAC_PROXY_CONFIG"])
    attributes = config["upstreams"][0]["authorization"]["resourceAttributes"]
    assert (attributes["resource"], attributes["name"]) == ("daemonsets", "ai-models-node-cache")
    with pytest.raises(helm_python.HelmRenderError, match="unknown workload resource"):
        probe_chart.evaluate('{{ include "ai_models.kube_rbac_proxy_container" (list . "pods" "x") }}')


@pytest.mark.parametrize(
    ("helper", "module", "served"),
    [
        (
            "ai_models.vpa_available",
            "vertical-pod-autoscaler-crd",
            "autoscaling.k8s.io/v1/VerticalPodAutoscaler",
        ),
        (
            "ai_models.service_monitors_available",
            "operator-prometheus-crd",
            "monitoring.coreos.com/v1/ServiceMonitor",
        ),
    ],
)
def test_api_availability_follows_the_crd_module_or_the_served_api(
    probe_chart: ProbeChart, helper: str, module: str, served: str
) -> None:
    template = f'{{{{ include "{helper}" . }}}}'
    # cert-manager stays on: the public routes need it in the global CertManager mode.
    without = module_values(global_overrides={"enabledModules": ["ai-models", "cert-manager"]})
    with_module = module_values(global_overrides={"enabledModules": ["ai-models", "cert-manager", module]})
    assert probe_chart.evaluate(template, without) == ""
    assert probe_chart.evaluate(template, with_module) == "true"
    assert probe_chart.evaluate(template, without, api_versions=(served,)) == "true"
