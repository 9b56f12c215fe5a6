"""The NodeCache node plugin as rendered (issue 13, D112-D114): the DaemonSet, the CSIDriver, the
SecurityPolicyException, the plugin's RBAC and its VPA, present only in delivery mode NodeCache.

The exception is checked against the DaemonSet itself: the pod's violations of PSS restricted are
computed from the rendered pod spec (support.pod_security) and must equal the exception's
allowances field by field, so a privilege added to either side alone fails here. Every other pod
of the module stays restricted with no exception at all.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity

from ai_models import cli
from ai_models.cli import build_parser
from ai_models.names import (
    API_INTERNAL_URL,
    MODULE_CA_CONFIGMAP,
    MODULE_CA_KEY,
    MODULE_NAMESPACE,
    MODULE_TOKEN_AUDIENCE,
    NODE_CACHE_COMPONENT,
    NODE_CACHE_DRIVER,
    NODE_CACHE_MODULE_CA_FILE,
    NODE_CACHE_MODULE_TOKEN_FILE,
)
from ai_models.nodecache.server import socket_path
from ai_models.nodecache.settings import NodeCacheSettings
from kubeemu.authz import Attributes
from kubeemu.cluster import Cluster
from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, pod_template, review
from support.pod_security import SPE_CONTAINER_LABEL_PREFIX, SPE_POD_LABEL, restricted_violations
from support.probe import ProbeChart
from support.render import RenderedChart
from support.scenarios import Scenario, scenario
from support.values import (
    COMMON_IMAGE_DIGEST,
    DEFAULT_GLOBAL,
    IMAGE_DIGEST,
    REGISTRAR_IMAGE_DIGEST,
    module_values,
)

NAME = "ai-models-node-cache"
NAMESPACE = MODULE_NAMESPACE
ACCOUNT = "node-cache"  # DMT: the ServiceAccount of templates/node-cache/rbac-for-us.yaml
KUBELET_DIR = "/var/lib/kubelet"
REGISTRATION_DIR = "/var/lib/kubelet/plugins_registry/"
SOCKET_DIR = f"/var/lib/kubelet/csi-plugins/{NODE_CACHE_DRIVER}/"
CACHE_ROOT = "/var/lib/ai-models/node-cache"
GLOBAL_REGISTRY = DEFAULT_GLOBAL["modulesImages"]["registry"]["base"]
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob")

NODE_CACHE = scenario("delivery-node-cache")
WITHOUT_POLICY_ENGINE = dataclasses.replace(
    NODE_CACHE,
    name="delivery-node-cache+no-admission-policy-engine",
    global_overrides={
        **NODE_CACHE.global_overrides,
        "enabledModules": [
            module
            for module in DEFAULT_GLOBAL["enabledModules"]
            if not module.startswith("admission-policy-engine")
        ],
    },
)
WITHOUT_VPA = dataclasses.replace(
    NODE_CACHE,
    name="delivery-node-cache+no-vpa",
    global_overrides={
        **NODE_CACHE.global_overrides,
        "enabledModules": [
            module for module in DEFAULT_GLOBAL["enabledModules"] if module != "vertical-pod-autoscaler-crd"
        ],
    },
)
VARIANTS = {item.name: item for item in (NODE_CACHE, WITHOUT_POLICY_ENGINE, WITHOUT_VPA)}


@cache
def rendered(name: str) -> RenderedChart:
    return (VARIANTS.get(name) or scenario(name)).render()


def daemonset(chart: RenderedChart) -> dict[str, Any]:
    return chart.get("DaemonSet", NAME, NAMESPACE)


def pod_spec(chart: RenderedChart) -> dict[str, Any]:
    spec: dict[str, Any] = daemonset(chart)["spec"]["template"]["spec"]
    return spec


def pod_labels(chart: RenderedChart) -> dict[str, str]:
    labels: dict[str, str] = daemonset(chart)["spec"]["template"]["metadata"]["labels"]
    return labels


def container(chart: RenderedChart, name: str) -> dict[str, Any]:
    (found,) = [item for item in pod_spec(chart)["containers"] if item["name"] == name]
    result: dict[str, Any] = found
    return result


def env_of(item: Mapping[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in item.get("env") or []}


def node_cache_objects(chart: RenderedChart) -> set[tuple[str, str]]:
    """(kind, name) of everything templates/node-cache/ renders."""
    found: set[tuple[str, str]] = set()
    for path, text in chart.files.items():
        if "/templates/node-cache/" in path and path.endswith(".yaml"):
            found |= {(doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(text) if doc}
    return found


# ----- only in NodeCache mode ----------------------------------------------------------------------

EVERY_OBJECT = {
    ("DaemonSet", NAME),
    ("CSIDriver", NODE_CACHE_DRIVER),
    ("SecurityPolicyException", NAME),
    ("ServiceAccount", ACCOUNT),
    ("ClusterRole", "d8:ai-models:node-cache"),
    ("ClusterRoleBinding", "d8:ai-models:node-cache"),
    ("VerticalPodAutoscaler", NAME),
    ("ValidatingAdmissionPolicy", "ai-models-node-cache-nodes"),
    ("ValidatingAdmissionPolicyBinding", "ai-models-node-cache-nodes"),
}


def test_node_cache_mode_renders_the_plugin_and_nothing_else_does() -> None:
    assert node_cache_objects(rendered(NODE_CACHE.name)) == EVERY_OBJECT
    assert node_cache_objects(rendered("minimal")) == set()
    assert rendered("minimal").of_kind("CSIDriver") == []
    assert rendered("minimal").of_kind("SecurityPolicyException") == []


def test_without_the_admission_policy_engine_there_is_no_exception_and_no_label() -> None:
    chart = rendered(WITHOUT_POLICY_ENGINE.name)
    assert node_cache_objects(chart) == EVERY_OBJECT - {("SecurityPolicyException", NAME)}
    assert not [key for key in pod_labels(chart) if key.startswith(SPE_POD_LABEL)]


def test_without_the_vpa_crd_there_is_no_vpa() -> None:
    assert node_cache_objects(rendered(WITHOUT_VPA.name)) == EVERY_OBJECT - {("VerticalPodAutoscaler", NAME)}


@pytest.mark.parametrize("item", list(VARIANTS.values()), ids=lambda item: item.name)
def test_every_object_is_valid_and_passes_review(item: Scenario) -> None:
    chart = rendered(item.name)
    for obj in chart.objects:
        validate_object(obj)
    findings = review(chart.objects, ClusterExpectations.from_values(item.values()))
    if item is WITHOUT_POLICY_ENGINE:
        # Nothing enforces the namespace's pod policy there and the exception kind does not
        # exist: the reviewer sees the plugin's privileges unwaived, and nothing else.
        prefix = f"DaemonSet/{NAMESPACE}/{NAME}: PSS restricted: "
        assert findings == [f"{prefix}{violation}" for violation in restricted_violations(pod_spec(chart))]
    else:
        assert findings == []


# ----- the DaemonSet -------------------------------------------------------------------------------


def test_the_daemonset_runs_on_the_selected_nodes_as_a_node_critical_rolling_daemon() -> None:
    chart = rendered(NODE_CACHE.name)
    ds = daemonset(chart)
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert ds["spec"]["selector"] == {"matchLabels": {"app": NAME}}
    assert pod_labels(chart)["app.kubernetes.io/component"] == NODE_CACHE_COMPONENT
    spec = pod_spec(chart)
    assert spec["nodeSelector"] == NODE_CACHE.values()["aiModels"]["delivery"]["nodeCache"]["nodeSelector"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["serviceAccountName"] == ACCOUNT
    assert spec["automountServiceAccountToken"] is True
    # No host namespaces: the plugin talks to kubelet over the socket directory only.
    for field in ("hostNetwork", "hostPID", "hostIPC", "dnsPolicy"):
        assert field not in spec
    # Deckhouse's any-node tolerations (control plane, dedicated nodes, autoscaler) and the
    # CSI-not-bootstrapped taint a node carries until its CSI plugins run.
    tolerations = spec["tolerations"]
    for toleration in (
        {"key": "node-role.kubernetes.io/control-plane"},
        {"key": "dedicated", "operator": "Exists"},
        {"key": "dedicated.deckhouse.io", "operator": "Exists"},
        {"key": "node.deckhouse.io/csi-not-bootstrapped", "operator": "Exists", "effect": "NoSchedule"},
    ):
        assert toleration in tolerations


def test_the_daemonset_follows_the_node_selector_setting() -> None:
    selector = {"node.deckhouse.io/group": "gpu-a100", "ai.deckhouse.io/model-cache": "enabled"}
    item = dataclasses.replace(
        NODE_CACHE,
        name="delivery-node-cache+selector",
        settings={"delivery": {"mode": "NodeCache", "nodeCache": {"size": "1Ti", "nodeSelector": selector}}},
    )
    chart = item.render()
    assert pod_spec(chart)["nodeSelector"] == selector
    assert env_of(container(chart, "node-cache"))["AI_MODELS_NODE_CACHE_SIZE"] == "1Ti"


def test_the_host_paths_are_exactly_the_kubelet_dirs_and_the_cache_root() -> None:
    volumes = {volume["name"]: volume for volume in pod_spec(rendered(NODE_CACHE.name))["volumes"]}
    host_paths = {
        volume["hostPath"]["path"]: volume["hostPath"]["type"]
        for volume in volumes.values()
        if "hostPath" in volume
    }
    assert host_paths == {
        KUBELET_DIR: "Directory",
        REGISTRATION_DIR: "Directory",
        SOCKET_DIR: "DirectoryOrCreate",
        CACHE_ROOT: "DirectoryOrCreate",
    }
    others = {name: set(volume) - {"name"} for name, volume in volumes.items() if "hostPath" not in volume}
    assert others == {"tmp": {"emptyDir"}, "module-token": {"projected"}, "module-ca": {"configMap"}}


def test_the_plugin_reads_the_serving_api_over_tls_with_a_module_audience_token() -> None:
    chart = rendered(NODE_CACHE.name)
    spec = pod_spec(chart)
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    # A pod-bound token for the module audience only, short-lived (kubelet rotates it at 80 %).
    assert volumes["module-token"]["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": MODULE_TOKEN_AUDIENCE,
                "expirationSeconds": 600,
                "path": "token",
            }
        }
    ]
    # The module CA's certificate alone, from a ConfigMap that holds no key.
    assert volumes["module-ca"]["configMap"] == {
        "name": MODULE_CA_CONFIGMAP,
        "items": [{"key": MODULE_CA_KEY, "path": MODULE_CA_KEY}],
    }
    ca = chart.get("ConfigMap", MODULE_CA_CONFIGMAP, namespace=NAMESPACE)
    assert set(ca["data"]) == {MODULE_CA_KEY}
    assert "PRIVATE KEY" not in ca["data"][MODULE_CA_KEY]
    assert (
        ca["data"][MODULE_CA_KEY].strip()
        == NODE_CACHE.values()["aiModels"]["internal"]["rootCA"]["crt"].strip()
    )
    plugin = container(chart, "node-cache")
    mounts = {mount["name"]: mount for mount in plugin["volumeMounts"]}
    env = env_of(plugin)
    assert env["AI_MODELS_NODE_CACHE_API_URL"] == API_INTERNAL_URL
    assert Path(env["AI_MODELS_NODE_CACHE_TOKEN_FILE"]).parent == Path(mounts["module-token"]["mountPath"])
    assert (
        Path(env["AI_MODELS_NODE_CACHE_API_CA_FILE"])
        == Path(mounts["module-ca"]["mountPath"]) / MODULE_CA_KEY
    )
    assert mounts["module-token"]["readOnly"]
    assert mounts["module-ca"]["readOnly"]
    # The api listens there: the Service's https-internal port leads to the internal listener.
    service = chart.get("Service", "ai-models-api", namespace=NAMESPACE)
    assert {port["name"]: port["port"] for port in service["spec"]["ports"]}["https-internal"] == 443


def test_bidirectional_propagation_only_on_the_kubelet_dir_of_the_plugin_container() -> None:
    spec = pod_spec(rendered(NODE_CACHE.name))
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    propagated = [
        (
            item["name"],
            volumes[mount["name"]]["hostPath"]["path"],
            mount["mountPath"],
            mount["mountPropagation"],
        )
        for item in spec["containers"]
        for mount in item["volumeMounts"]
        if "mountPropagation" in mount
    ]
    assert propagated == [("node-cache", KUBELET_DIR, KUBELET_DIR, "Bidirectional")]


def test_the_registrar_registers_the_driver_socket_with_kubelet() -> None:
    chart = rendered(NODE_CACHE.name)
    registrar = container(chart, "node-driver-registrar")
    assert registrar["image"] == f"{GLOBAL_REGISTRY}@{REGISTRAR_IMAGE_DIGEST}"
    assert registrar["args"] == [
        "--v=2",
        "--csi-address=/csi/csi.sock",
        f"--kubelet-registration-path={SOCKET_DIR}csi.sock",
        "--http-endpoint=:9809",
    ]
    assert {mount["mountPath"]: mount["name"] for mount in registrar["volumeMounts"]} == {
        "/csi": "plugin-dir",
        "/registration": "registration-dir",
    }
    assert registrar["ports"] == [{"name": "http-registrar", "containerPort": 9809, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert registrar[probe]["httpGet"] == {"path": "/healthz", "port": "http-registrar"}
    # Restricted-flexible: everything restricted asks, except root for the registration socket.
    assert registrar["securityContext"] == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "runAsNonRoot": False,
        "runAsUser": 0,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_plugin_container_runs_the_node_cache_process() -> None:
    chart = rendered(NODE_CACHE.name)
    plugin = container(chart, "node-cache")
    registry = NODE_CACHE.values()["aiModels"]["registry"]["base"]
    assert plugin["image"] == f"{registry}/ai-models@{IMAGE_DIGEST}"
    assert [*plugin["command"], *plugin["args"]] == [
        "ai-models",
        "node-cache",
        "--csi-endpoint=unix:///csi/csi.sock",
        "--node-name=$(NODE_NAME)",
        f"--cache-root={CACHE_ROOT}",
    ]
    assert env_of(plugin) == {
        "NODE_NAME": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        "AI_MODELS_LOG_LEVEL": "Info",
        "AI_MODELS_LOG_FORMAT": "json",
        "AI_MODELS_NODE_CACHE_SIZE": "500Gi",
        "AI_MODELS_NODE_CACHE_API_URL": f"https://ai-models-api.{NAMESPACE}.svc",
        "AI_MODELS_NODE_CACHE_TOKEN_FILE": NODE_CACHE_MODULE_TOKEN_FILE,
        "AI_MODELS_NODE_CACHE_API_CA_FILE": NODE_CACHE_MODULE_CA_FILE,
        "AI_MODELS_NODE_CACHE_KUBELET_DIR": KUBELET_DIR,
        "AI_MODELS_NODE_CACHE_HEALTH_PORT": "9808",
    }
    # The plugin never holds object store credentials: files come from the serving API.
    assert not [
        name for name in env_of(plugin) if name.startswith(("AWS_", "AI_MODELS_S3", "AI_MODELS_STORE"))
    ]
    assert {mount["mountPath"]: mount["name"] for mount in plugin["volumeMounts"]} == {
        KUBELET_DIR: "kubelet-dir",
        "/csi": "plugin-dir",
        CACHE_ROOT: "cache-root",
        "/tmp": "tmp",
        "/var/run/secrets/ai-models": "module-token",
        "/etc/ai-models/module-ca": "module-ca",
    }
    assert plugin["ports"] == [{"name": "http-health", "containerPort": 9808, "protocol": "TCP"}]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert plugin[probe]["httpGet"] == {"path": "/healthz", "port": "http-health"}
    assert plugin["securityContext"] == {
        "privileged": True,
        "allowPrivilegeEscalation": True,
        "runAsNonRoot": False,
        "runAsUser": 0,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert plugin["resources"]["limits"]["memory"] == "384Mi"


def test_the_registrar_image_follows_the_kubernetes_minor() -> None:
    digest = "sha256:" + "e4" * 32
    item = dataclasses.replace(
        NODE_CACHE,
        name="delivery-node-cache+k8s-1.33",
        kube_version="v1.33.4",
        global_overrides={
            "discovery": {"kubernetesVersion": "1.33.4"},
            "modulesImages": {"digests": {"common": {"csiNodeDriverRegistrar133": digest}}},
        },
    )
    assert container(item.render(), "node-driver-registrar")["image"] == f"{GLOBAL_REGISTRY}@{digest}"


K8S_135 = dataclasses.replace(
    NODE_CACHE,
    name="delivery-node-cache+k8s-1.35",
    kube_version="v1.35.0",
    global_overrides={**NODE_CACHE.global_overrides, "discovery": {"kubernetesVersion": "1.35.0"}},
)


def controller_env(chart: RenderedChart) -> dict[str, Any]:
    deployment = chart.get("Deployment", "ai-models-controller", NAMESPACE)
    (found,) = [
        item for item in deployment["spec"]["template"]["spec"]["containers"] if item["name"] == "controller"
    ]
    return env_of(found)


def module_registry(chart: RenderedChart) -> str:
    deployment = chart.get("Deployment", "ai-models-controller", NAMESPACE)
    image: str = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    base, _, digest = image.partition("@")
    assert digest == IMAGE_DIGEST
    return base


def test_a_release_without_the_registrar_renders_without_the_plugin_and_tells_the_controller_why() -> None:
    chart = K8S_135.render()

    # The plugin's pods could not start: the DaemonSet, its VPA and its exception are left out...
    assert node_cache_objects(chart) == EVERY_OBJECT - {
        ("DaemonSet", NAME),
        ("VerticalPodAutoscaler", NAME),
        ("SecurityPolicyException", NAME),
    }
    # ...and the rest of the release renders: the controller, the api, the webhook.
    assert chart.get("Deployment", "ai-models-api", NAMESPACE)
    reason = controller_env(chart)["AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE"]
    for words in (
        "node-driver-registrar image for Kubernetes 1.35 missing",
        "global.modulesImages.digests.aiModels.csiNodeDriverRegistrar135",
        "global.modulesImages.digests.common.csiNodeDriverRegistrar135",
        "set delivery.mode to SharedPVC",
    ):
        assert words in reason


def test_a_release_with_the_registrar_tells_the_controller_nothing_is_missing() -> None:
    assert "AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE" not in controller_env(rendered(NODE_CACHE.name))
    # SharedPVC runs no plugin, so nothing is missing there even without the registrar.
    shared = dataclasses.replace(K8S_135, name="minimal+k8s-1.35", settings={}).render()
    assert "AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE" not in controller_env(shared)
    assert node_cache_objects(shared) == set()


def test_the_modules_own_registrar_image_wins_over_the_common_one() -> None:
    own = "sha256:" + "a7" * 32
    item = dataclasses.replace(
        NODE_CACHE,
        name="delivery-node-cache+own-registrar",
        global_overrides={
            **NODE_CACHE.global_overrides,
            "modulesImages": {"digests": {"aiModels": {"csiNodeDriverRegistrar134": own}}},
        },
    )
    chart = item.render()
    # The module's images come from the module's registry, as its controller's does.
    assert container(chart, "node-driver-registrar")["image"] == f"{module_registry(chart)}@{own}"


def test_the_modules_own_registrar_image_serves_a_kubernetes_deckhouse_has_none_for() -> None:
    own = "sha256:" + "b8" * 32
    item = dataclasses.replace(
        K8S_135,
        name="delivery-node-cache+k8s-1.35+own-registrar",
        global_overrides={
            **K8S_135.global_overrides,
            "modulesImages": {"digests": {"aiModels": {"csiNodeDriverRegistrar135": own}}},
        },
    )
    chart = item.render()
    assert container(chart, "node-driver-registrar")["image"] == f"{module_registry(chart)}@{own}"
    assert "AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE" not in controller_env(chart)


def test_only_the_common_registrar_image_is_used_when_the_module_has_none() -> None:
    values = NODE_CACHE.values()
    assert "csiNodeDriverRegistrar134" not in values["global"]["modulesImages"]["digests"]["aiModels"]
    registrar = container(rendered(NODE_CACHE.name), "node-driver-registrar")
    assert registrar["image"] == f"{GLOBAL_REGISTRY}@{REGISTRAR_IMAGE_DIGEST}"


def test_the_common_images_are_distinct_in_the_test_values() -> None:
    # Otherwise the image assertions above could not tell the registrar from kube-rbac-proxy.
    assert len({COMMON_IMAGE_DIGEST, REGISTRAR_IMAGE_DIGEST, IMAGE_DIGEST}) == 3


# ----- the CSIDriver -------------------------------------------------------------------------------


def test_the_csi_driver_is_node_only_ephemeral_with_pod_info_and_no_fs_group_changes() -> None:
    driver = rendered(NODE_CACHE.name).get("CSIDriver", NODE_CACHE_DRIVER)
    assert "namespace" not in driver["metadata"]
    assert driver["spec"] == {
        "attachRequired": False,
        "podInfoOnMount": True,
        "volumeLifecycleModes": ["Ephemeral"],
        "fsGroupPolicy": "None",
    }


# ----- the SecurityPolicyException -----------------------------------------------------------------

Allowance = tuple[Any, ...]


def needed_allowances(spec: Mapping[str, Any]) -> set[Allowance]:
    """What an exception must allow for this pod spec: its PSS restricted violations, one entry per
    distinct control and value; a hostPath volume needs the hostPath type and its exact path, with
    readOnly true only if every mount of it is read-only."""
    mounts: dict[str, list[bool]] = {}
    for item in [*(spec.get("initContainers") or []), *spec["containers"]]:
        for mount in item.get("volumeMounts") or []:
            mounts.setdefault(mount["name"], []).append(bool(mount.get("readOnly")))
    by_path = {
        volume["hostPath"]["path"]: volume["name"] for volume in spec["volumes"] if "hostPath" in volume
    }
    needed: set[Allowance] = set()
    for violation in restricted_violations(spec):
        if violation.control == "hostPath":
            needed.add(("volumes.types", "hostPath"))
            read_only = all(mounts.get(by_path[violation.value], [False]))
            needed.add(("volumes.hostPath", violation.value, read_only))
        else:
            needed.add((violation.control, violation.value))
    return needed


def granted_allowances(spe_spec: Mapping[str, Any]) -> Iterator[tuple[Allowance, str]]:
    """Every allowance of an exception spec with its description. Fails on a kind of allowance this
    function does not know, so an exception cannot grow a field the comparison would not see."""
    for section, fields in spe_spec.items():
        for field, allowance in fields.items():
            key = f"{section}.{field}"
            if key in {
                "securityContext.privileged",
                "securityContext.allowPrivilegeEscalation",
                "securityContext.runAsNonRoot",
            }:
                yield (field, allowance["allowedValue"]), allowance["metadata"]["description"]
            elif key == "securityContext.runAsUser":
                for uid in allowance["allowedValues"]:
                    yield (field, uid), allowance["metadata"]["description"]
            elif key == "volumes.types":
                for volume_type in allowance["allowedValues"]:
                    yield (key, volume_type), allowance["metadata"]["description"]
            elif key == "volumes.hostPath":
                for item in allowance["allowedValues"]:
                    yield (key, item["path"], item["readOnly"]), item["metadata"]["description"]
            else:
                raise AssertionError(f"the exception allows {key}, which the node-cache pod does not need")


def the_exception(chart: RenderedChart) -> dict[str, Any]:
    spe: dict[str, Any] = chart.get("SecurityPolicyException", NAME, NAMESPACE)
    return spe


def test_the_exception_allows_exactly_what_the_node_cache_pod_needs() -> None:
    chart = rendered(NODE_CACHE.name)
    granted = dict(granted_allowances(the_exception(chart)["spec"]))
    assert set(granted) == needed_allowances(pod_spec(chart))
    # Spelled out, so a reader sees the privileges without running the derivation.
    assert set(granted) == {
        ("privileged", True),
        ("allowPrivilegeEscalation", True),
        ("runAsNonRoot", False),
        ("runAsUser", 0),
        ("volumes.types", "hostPath"),
        ("volumes.hostPath", KUBELET_DIR, False),
        ("volumes.hostPath", REGISTRATION_DIR, False),
        ("volumes.hostPath", SOCKET_DIR, False),
        ("volumes.hostPath", CACHE_ROOT, False),
    }
    for allowance, description in granted.items():
        assert len(description.split()) >= 8, f"{allowance}: say why, not just what ({description!r})"


def test_the_comparison_sees_a_privilege_added_to_the_pod_alone() -> None:
    chart = rendered(NODE_CACHE.name)
    spec = copy.deepcopy(pod_spec(chart))
    spec["volumes"].append({"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}})
    container_of = {item["name"]: item for item in spec["containers"]}
    container_of["node-cache"]["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    container_of["node-cache"]["volumeMounts"].append({"name": "dev", "mountPath": "/dev", "readOnly": True})
    granted = dict(granted_allowances(the_exception(chart)["spec"]))
    assert needed_allowances(spec) - set(granted) == {
        ("volumes.hostPath", "/dev", True),
        ("capabilities", "SYS_ADMIN"),
    }


def test_the_exception_selects_the_plugin_pod_only() -> None:
    chart = rendered(NODE_CACHE.name)
    spe = the_exception(chart)
    assert spe["metadata"]["namespace"] == NAMESPACE
    assert pod_labels(chart)[SPE_POD_LABEL] == spe["metadata"]["name"]
    for workload in (obj for kind in WORKLOAD_KINDS for obj in chart.of_kind(kind)):
        if workload["metadata"]["name"] == NAME:
            continue
        labels = (pod_template(workload).get("metadata") or {}).get("labels") or {}
        assert not [key for key in labels if key.startswith((SPE_POD_LABEL, SPE_CONTAINER_LABEL_PREFIX))]


def job_pod_templates(chart: RenderedChart) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Job pod templates the controller reads from ConfigMaps (publisher, materializer)."""
    for config_map in chart.of_kind("ConfigMap"):
        text = (config_map.get("data") or {}).get("template.yaml")
        if text:
            yield config_map["metadata"]["name"], yaml.safe_load(text)


@pytest.mark.parametrize("name", [NODE_CACHE.name, WITHOUT_POLICY_ENGINE.name, "minimal"])
def test_every_other_pod_of_the_module_is_restricted_without_exception(name: str) -> None:
    chart = rendered(name)
    pods = [
        (f"{obj['kind']}/{obj['metadata']['name']}", pod_template(obj))
        for kind in WORKLOAD_KINDS
        for obj in chart.of_kind(kind)
        if obj["metadata"]["name"] != NAME
    ]
    pods += list(job_pod_templates(chart))
    assert {pod for pod, _ in pods} >= {
        "Deployment/ai-models-controller",
        "Deployment/ai-models-api",
        "ai-models-publisher-template",
        "ai-models-materializer-template",
    }
    for pod, template in pods:
        assert restricted_violations(template["spec"]) == [], pod
    namespace = chart.get("Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["security.deckhouse.io/pod-policy"] == "restricted"


# ----- RBAC ----------------------------------------------------------------------------------------

SUBJECT = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated")
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
GRANTED = {
    ("ai.deckhouse.io", "models", "get"),
    ("ai.deckhouse.io", "clustermodels", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "nodes", "patch"),
}
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
RESOURCES = [
    ("ai.deckhouse.io", "models"),
    ("ai.deckhouse.io", "clustermodels"),
    ("ai.deckhouse.io", "models/status"),
    ("ai.deckhouse.io", "modelcatalogsources"),
    ("", "pods"),
    ("", "nodes"),
    ("", "nodes/status"),
    ("", "secrets"),
    ("", "configmaps"),
    ("", "events"),
    ("", "persistentvolumeclaims"),
    ("", "serviceaccounts/token"),
    ("apps", "daemonsets"),
    ("storage.k8s.io", "csidrivers"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("coordination.k8s.io", "leases"),
]


@cache
def authorizer() -> Cluster:
    chart = rendered(NODE_CACHE.name)
    cluster = Cluster()
    cluster.apply(chart.get("Namespace", NAMESPACE))
    for kind in RBAC_KINDS:
        for obj in chart.of_kind(kind):
            cluster.apply(obj)
    return cluster


@pytest.mark.parametrize(("group", "resource"), RESOURCES)
@pytest.mark.parametrize("namespace", ["", NAMESPACE, "team-a"])
def test_the_plugin_may_do_exactly_what_it_reads_and_writes(
    group: str, resource: str, namespace: str
) -> None:
    resource_name, _, subresource = resource.partition("/")
    for verb in VERBS:
        attrs = Attributes(
            user=SUBJECT,
            groups=GROUPS,
            verb=verb,
            namespace=namespace,
            api_group=group,
            resource=resource_name,
            subresource=subresource,
        )
        expected = (group, resource, verb) in GRANTED
        assert authorizer().authz.authorize(attrs).allowed is expected, (verb, group, resource, namespace)


def test_the_plugin_identity_follows_the_dmt_rules_and_hands_out_no_token() -> None:
    chart = rendered(NODE_CACHE.name)
    account = chart.get("ServiceAccount", ACCOUNT, NAMESPACE)
    assert account["automountServiceAccountToken"] is False
    assert pod_spec(chart)["serviceAccountName"] == ACCOUNT
    (binding,) = [
        obj
        for obj in chart.of_kind("ClusterRoleBinding") + chart.of_kind("RoleBinding")
        if {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE} in (obj.get("subjects") or [])
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "d8:ai-models:node-cache",
    }
    for rule in chart.get("ClusterRole", "d8:ai-models:node-cache")["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key]


# ----- the VPA -------------------------------------------------------------------------------------


def test_the_vpa_moves_requests_of_both_containers_within_the_limits() -> None:
    chart = rendered(NODE_CACHE.name)
    vpa = chart.get("VerticalPodAutoscaler", NAME, NAMESPACE)
    assert vpa["spec"]["targetRef"] == {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": NAME}
    assert vpa["spec"]["updatePolicy"]["updateMode"] == "InPlaceOrRecreate"
    policies = {
        policy["containerName"]: policy for policy in vpa["spec"]["resourcePolicy"]["containerPolicies"]
    }
    assert set(policies) == {item["name"] for item in pod_spec(chart)["containers"]}
    for name, policy in policies.items():
        resources = container(chart, name)["resources"]
        assert policy["controlledValues"] == "RequestsOnly"
        assert policy["maxAllowed"]["memory"] == resources["limits"]["memory"], name
        for resource in ("cpu", "memory"):
            low, high = (parse_quantity(policy[bound][resource]) for bound in ("minAllowed", "maxAllowed"))
            assert low <= parse_quantity(resources["requests"][resource]) <= high, (name, resource)


# ----- helpers added for these templates -----------------------------------------------------------


@pytest.mark.parametrize(
    ("discovered", "capabilities", "key"),
    [
        ("1.34.1", "v1.33.0", "csiNodeDriverRegistrar134"),  # discovery wins
        (None, "v1.33.0", "csiNodeDriverRegistrar133"),  # then what the API server reports
        ("1.30.14", "v1.34.0", "csiNodeDriverRegistrar130"),
    ],
)
def test_the_registrar_image_key_is_the_discovered_kubernetes_minor(
    probe_chart: ProbeChart, discovered: str | None, capabilities: str, key: str
) -> None:
    digest = "sha256:" + "f5" * 32
    values = module_values(
        global_overrides={
            "discovery": {"kubernetesVersion": discovered},
            "modulesImages": {"digests": {"common": {key: digest}}},
        }
    )
    image = probe_chart.evaluate(
        '{{ include "ai_models.csi_node_driver_registrar_image" . }}', values, kube_version=capabilities
    )
    assert image == f"{GLOBAL_REGISTRY}@{digest}"


@pytest.mark.parametrize(
    ("modules", "api_versions", "available"),
    [
        # DKP 1.75+ fills enabledModules with the engine's own name; older releases with the shim.
        (["admission-policy-engine"], [], "true"),
        (["admission-policy-engine-crd"], [], "true"),
        # The capability decides wherever the render has discovery, whatever the module list says.
        ([], ["deckhouse.io/v1alpha1/SecurityPolicyException"], "true"),
        ([], [], ""),
        (["admission-policy-engine-extra"], ["deckhouse.io/v1alpha1/SecurityPolicy"], ""),
    ],
)
def test_exceptions_are_available_where_the_kind_is_served_or_the_policy_engine_is_enabled(
    probe_chart: ProbeChart, modules: list[str], api_versions: list[str], available: str
) -> None:
    values = module_values(global_overrides={"enabledModules": ["cert-manager", *modules]})
    answer = probe_chart.evaluate(
        '{{ include "ai_models.security_policy_exceptions_available" . }}', values, api_versions=api_versions
    )
    assert answer == available


# ----- what the process reads ----------------------------------------------------------------------


def test_the_command_line_is_what_the_cli_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    chart = rendered(NODE_CACHE.name)
    plugin = container(chart, "node-cache")
    monkeypatch.setenv("NODE_NAME", "gpu-1")
    argv = [arg.replace("$(NODE_NAME)", "gpu-1") for arg in plugin["args"]]
    assert plugin["command"] == ["ai-models"]
    args = build_parser().parse_args(argv)
    assert args.handler is cli._node_cache
    assert args.node_name == "gpu-1"
    # The socket the plugin serves is the one the registrar announces, in the shared directory.
    registrar_address = container(chart, "node-driver-registrar")["args"][1].removeprefix("--csi-address=")
    assert str(socket_path(args.csi_endpoint)) == registrar_address == "/csi/csi.sock"
    mounts = {mount["mountPath"] for mount in plugin["volumeMounts"]}
    assert args.cache_root in mounts


def test_the_environment_is_what_the_plugin_settings_read(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = container(rendered(NODE_CACHE.name), "node-cache")
    literal = {name: value for name, value in env_of(plugin).items() if isinstance(value, str)}
    fields = {NodeCacheSettings.variable(field) for field in NodeCacheSettings.model_fields}
    # The settings ignore unknown variables, so a misspelt name would be dropped silently.
    assert {name for name in literal if name.startswith("AI_MODELS_")} <= fields
    for key in list(os.environ):
        if key.startswith("AI_MODELS_"):
            monkeypatch.delenv(key)
    for key, value in literal.items():
        monkeypatch.setenv(key, value)
    settings = NodeCacheSettings()  # type: ignore[call-arg]  # required fields come from the environment
    assert settings.node_cache_size == parse_quantity("500Gi")
    assert settings.node_cache_api_url == f"https://ai-models-api.{NAMESPACE}.svc"
    assert str(settings.node_cache_kubelet_dir) in {mount["mountPath"] for mount in plugin["volumeMounts"]}
    assert settings.node_cache_token_file == Path(NODE_CACHE_MODULE_TOKEN_FILE)
    assert settings.node_cache_api_ca_file == NODE_CACHE_MODULE_CA_FILE
    # kubelet probes the pod IP: the listener must be on every address, on the probed port.
    assert settings.node_cache_health_address == "0.0.0.0"
    assert [settings.node_cache_health_port] == [port["containerPort"] for port in plugin["ports"]]
