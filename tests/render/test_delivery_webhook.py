"""The workload admission gate of model delivery as rendered: the MutatingWebhookConfiguration, the
controller's webhook listener behind it (Service port, container port, certificate mount, process
settings, restart on a new certificate), present exactly when the internal TLS hook has issued the
controller's certificate.

The configuration is also written to the API emulator (kubeemu, D79), which validates it like the
apiserver and calls the webhook over HTTPS with the rendered caBundle for the workloads its rules,
namespaceSelector and matchConditions (CEL) select: the CEL is evaluated, not read.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import ssl
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import pytest

from ai_models.controller.settings import ControllerSettings
from ai_models.names import (
    CLUSTER_MODEL_ANNOTATION,
    CONTROLLER_SERVICE,
    CONTROLLER_TLS_SECRET,
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    DELIVERY_WEBHOOK_CONFIGURATION,
    DELIVERY_WEBHOOK_NAME,
    DELIVERY_WEBHOOK_PATH,
    DELIVERY_WEBHOOK_PORT_NAME,
    MATERIALIZER_TEMPLATE_CONFIGMAP,
    MODEL_ANNOTATION,
    MODULE_CA_CONFIGMAP,
    MODULE_NAMESPACE,
)
from kubeemu.pytest_fixtures import RunningEmulator
from support.manifest_schemas import validate_object
from support.manifests import ClusterExpectations, review
from support.render import RenderedChart
from support.scenarios import Scenario, generated_certificate, scenario
from support.webhook_listener import WebhookListener

CONTROLLER = "ai-models-controller"
NAMESPACE = MODULE_NAMESPACE
CERT_DIR = "/etc/ai-models/webhook-tls"
WEBHOOK_ENV = ("AI_MODELS_CONTROLLER_WEBHOOK_CERT_DIR", "AI_MODELS_CONTROLLER_WEBHOOK_PORT")
# The names the apiserver reaches the controller Service by (the webhook uses the .svc one).
CONTROLLER_SERVICE_NAMES = (
    CONTROLLER_SERVICE,
    f"{CONTROLLER_SERVICE}.{NAMESPACE}",
    f"{CONTROLLER_SERVICE}.{NAMESPACE}.svc",
)
WORKLOAD_NAMESPACE = "team-a"


def with_controller_cert(base: Scenario) -> Scenario:
    """`base` once the internal TLS hook has run: the module CA and the controller's certificate."""
    pair = generated_certificate(CONTROLLER_SERVICE_NAMES)
    internal = {
        **base.internal,
        "rootCA": {"crt": pair.ca_pem},
        "controllerCert": {"ca": pair.ca_pem, "crt": pair.cert_pem, "key": pair.key_pem},
    }
    return dataclasses.replace(base, name=f"{base.name}+controller-cert", internal=internal)


WITH_CERT = with_controller_cert(scenario("minimal"))
NODE_CACHE_WITH_CERT = with_controller_cert(scenario("delivery-node-cache"))


@cache
def rendered(name: str) -> RenderedChart:
    for item in (WITH_CERT, NODE_CACHE_WITH_CERT):
        if item.name == name:
            return item.render()
    return scenario(name).render()


def controller_pod(chart: RenderedChart) -> dict[str, Any]:
    template: dict[str, Any] = chart.get("Deployment", CONTROLLER, NAMESPACE)["spec"]["template"]
    return template


def controller_container(chart: RenderedChart) -> dict[str, Any]:
    (main,) = [item for item in controller_pod(chart)["spec"]["containers"] if item["name"] == "controller"]
    found: dict[str, Any] = main
    return found


def env(chart: RenderedChart) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in controller_container(chart)["env"]}


def webhook_configurations(chart: RenderedChart) -> list[dict[str, Any]]:
    return chart.of_kind("MutatingWebhookConfiguration")


def the_webhook(chart: RenderedChart) -> dict[str, Any]:
    (configuration,) = webhook_configurations(chart)
    (hook,) = configuration["webhooks"]
    found: dict[str, Any] = hook
    return found


# ----- without the certificate ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["minimal", "delivery-node-cache", "api-internal-tls"])
def test_without_the_controller_certificate_there_is_no_webhook(name: str) -> None:
    chart = rendered(name)
    assert not scenario(name).values()["aiModels"]["internal"]["controllerCert"].get("crt")
    assert webhook_configurations(chart) == []
    main = controller_container(chart)
    assert DELIVERY_WEBHOOK_PORT_NAME not in {port["name"] for port in main["ports"]}
    assert not set(WEBHOOK_ENV) & set(env(chart))
    assert "webhook-tls" not in {volume["name"] for volume in controller_pod(chart)["spec"]["volumes"]}
    assert "webhook-tls" not in {mount["name"] for mount in main["volumeMounts"]}
    assert "annotations" not in controller_pod(chart)["metadata"]
    service_ports = chart.get("Service", CONTROLLER, NAMESPACE)["spec"]["ports"]
    assert DELIVERY_WEBHOOK_PORT_NAME not in {port["name"] for port in service_ports}
    assert [obj for obj in chart.of_kind("Secret") if obj["metadata"]["name"] == CONTROLLER_TLS_SECRET] == []


def test_a_controller_certificate_without_the_module_ca_fails_the_render() -> None:
    internal = copy.deepcopy(WITH_CERT.internal)
    del internal["rootCA"]
    broken = dataclasses.replace(WITH_CERT, internal=internal)
    with pytest.raises(helm_python.HelmRenderError, match=r"aiModels\.internal\.rootCA\.crt is required"):
        broken.render()


# ----- the configuration ---------------------------------------------------------------------------


def inventory(chart: RenderedChart) -> set[tuple[str, str, str]]:
    return {
        (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) for obj in chart.objects
    }


def test_the_certificate_adds_exactly_the_webhook_and_its_secret() -> None:
    added = inventory(rendered(WITH_CERT.name)) - inventory(rendered("minimal"))
    assert added == {
        ("MutatingWebhookConfiguration", "", DELIVERY_WEBHOOK_CONFIGURATION),
        ("Secret", NAMESPACE, CONTROLLER_TLS_SECRET),
        # The module CA's certificate, for the node plugin and the materializers (D159).
        ("ConfigMap", NAMESPACE, MODULE_CA_CONFIGMAP),
    }
    assert inventory(rendered("minimal")) <= inventory(rendered(WITH_CERT.name))


@pytest.mark.parametrize("item", [WITH_CERT, NODE_CACHE_WITH_CERT], ids=["SharedPVC", "NodeCache"])
def test_with_the_certificate_every_object_is_valid_and_passes_review(item: Scenario) -> None:
    """The webhook is configured in both delivery modes: the controller admits workloads in each
    (issue 13), the same configuration in both."""
    chart = rendered(item.name)
    assert len(webhook_configurations(chart)) == 1
    assert webhook_configurations(chart) == webhook_configurations(rendered(WITH_CERT.name))
    for obj in chart.objects:
        validate_object(obj)
    assert review(chart.objects, ClusterExpectations.from_values(item.values())) == []


def test_the_webhook_configuration() -> None:
    item = WITH_CERT
    chart = rendered(item.name)
    (configuration,) = webhook_configurations(chart)
    assert configuration["metadata"]["name"] == DELIVERY_WEBHOOK_CONFIGURATION
    assert "namespace" not in configuration["metadata"]
    assert configuration["metadata"]["labels"] == {
        "heritage": "deckhouse",
        "module": "ai-models",
        "app": CONTROLLER,
    }
    # Applied once the controller serving it is ready (DMT's webhook-configuration-annotations).
    assert configuration["metadata"]["annotations"] == {
        "werf.io/deploy-dependency-controller": (
            f"state=ready,kind=Deployment,group=apps,version=v1,name={CONTROLLER}"
        )
    }
    assert chart.get("Deployment", CONTROLLER, NAMESPACE)
    hook = the_webhook(chart)
    ca = item.values()["aiModels"]["internal"]["rootCA"]["crt"]
    assert hook["clientConfig"] == {
        "service": {
            "namespace": NAMESPACE,
            "name": CONTROLLER_SERVICE,
            "path": DELIVERY_WEBHOOK_PATH,
            "port": 443,
        },
        "caBundle": base64.b64encode(ca.encode()).decode(),
    }
    assert {
        key: value for key, value in hook.items() if key not in {"clientConfig", "rules", "matchConditions"}
    } == {
        "name": DELIVERY_WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 5,
        "matchPolicy": "Equivalent",
        "reinvocationPolicy": "Never",
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": [NAMESPACE, "kube-system", "kube-public", "kube-node-lease"],
                },
                {"key": "heritage", "operator": "NotIn", "values": ["deckhouse"]},
            ]
        },
    }
    operations = ["CREATE", "UPDATE"]
    assert hook["rules"] == [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets", "daemonsets"],
            "operations": operations,
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["cronjobs"],
            "operations": operations,
            "scope": "Namespaced",
        },
    ]
    (condition,) = hook["matchConditions"]
    for annotation in (MODEL_ANNOTATION, CLUSTER_MODEL_ANNOTATION):
        for variable in ("object", "oldObject"):
            assert f"'{annotation}' in {variable}.metadata.annotations" in condition["expression"]


def test_the_service_leads_443_to_the_webhook_listener() -> None:
    chart = rendered(WITH_CERT.name)
    ports = {port["name"]: port for port in chart.get("Service", CONTROLLER, NAMESPACE)["spec"]["ports"]}
    assert ports[DELIVERY_WEBHOOK_PORT_NAME] == {
        "name": DELIVERY_WEBHOOK_PORT_NAME,
        "port": the_webhook(chart)["clientConfig"]["service"]["port"],
        "targetPort": DELIVERY_WEBHOOK_PORT_NAME,
        "protocol": "TCP",
    }
    assert set(ports) == {"https-metrics", DELIVERY_WEBHOOK_PORT_NAME}
    container_ports = {port["name"]: port for port in controller_container(chart)["ports"]}
    assert container_ports[DELIVERY_WEBHOOK_PORT_NAME] == {
        "name": DELIVERY_WEBHOOK_PORT_NAME,
        "containerPort": 9443,
        "protocol": "TCP",
    }


# ----- the listener in the controller --------------------------------------------------------------


def clean_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [key for key in os.environ if key.startswith("AI_MODELS_")]:
        monkeypatch.delenv(key)


def test_the_controller_serves_the_mounted_certificate_on_its_webhook_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chart = rendered(WITH_CERT.name)
    main = controller_container(chart)
    (mount,) = [item for item in main["volumeMounts"] if item["name"] == "webhook-tls"]
    assert mount == {"name": "webhook-tls", "mountPath": CERT_DIR, "readOnly": True}
    (volume,) = [item for item in controller_pod(chart)["spec"]["volumes"] if item["name"] == "webhook-tls"]
    assert volume["secret"] == {
        "secretName": CONTROLLER_TLS_SECRET,
        "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
    }
    # What the kubelet would put into the mount, read through the process's own settings.
    secret = chart.get("Secret", CONTROLLER_TLS_SECRET, NAMESPACE)
    mounted = tmp_path / "mount"
    mounted.mkdir()
    for item in volume["secret"]["items"]:
        (mounted / item["path"]).write_bytes(base64.b64decode(secret["data"][item["key"]]))
    clean_settings_env(monkeypatch)
    for key in WEBHOOK_ENV:
        monkeypatch.setenv(key, env(chart)[key].replace(CERT_DIR, str(mounted)))
    settings = ControllerSettings()
    assert settings.controller_webhook_cert_dir == mounted
    assert settings.controller_webhook_port == 9443
    assert settings.controller_webhook_path == the_webhook(chart)["clientConfig"]["service"]["path"]
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(mounted / "tls.crt", mounted / "tls.key")  # the key matches the certificate


def test_pods_restart_when_the_controller_certificate_changes() -> None:
    first = controller_pod(rendered(WITH_CERT.name))["metadata"]["annotations"]["checksum/controller-tls"]
    cert = WITH_CERT.internal["controllerCert"]
    changed = dataclasses.replace(
        WITH_CERT, internal={**WITH_CERT.internal, "controllerCert": {**cert, "crt": cert["ca"]}}
    ).render()
    second = controller_pod(changed)["metadata"]["annotations"]["checksum/controller-tls"]
    assert first != second


@pytest.mark.parametrize(
    ("settings", "timeout_seconds", "slots"),
    [
        ({}, 600, 2),
        ({"delivery": {"provisioningTimeout": "1h30m", "maxConcurrentMaterializations": 5}}, 5400, 5),
        ({"delivery": {"provisioningTimeout": "45s"}}, 45, 2),
    ],
)
def test_delivery_settings_reach_the_controller_settings(
    settings: dict[str, Any], timeout_seconds: int, slots: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = dataclasses.replace(WITH_CERT, name=f"{WITH_CERT.name}+{json.dumps(settings)}", settings=settings)
    chart = item.render()
    literal = env(chart)
    clean_settings_env(monkeypatch)
    for key, value in literal.items():
        if value:
            monkeypatch.setenv(key, value)
    parsed = ControllerSettings()
    assert parsed.delivery_provisioning_timeout.total_seconds() == timeout_seconds
    assert parsed.delivery_max_concurrent_materializations == slots
    assert parsed.delivery_registry_secret == "ai-models-module-registry"
    chart.get("Secret", parsed.delivery_registry_secret, NAMESPACE)  # the one the chart renders
    template_file = parsed.delivery_materializer_template_file
    assert template_file is not None
    main = controller_container(chart)
    (mount,) = [item for item in main["volumeMounts"] if item["name"] == "materializer-template"]
    assert mount["readOnly"] is True
    assert str(template_file) == f"{mount['mountPath']}/template.yaml"
    (volume,) = [
        item for item in controller_pod(chart)["spec"]["volumes"] if item["name"] == "materializer-template"
    ]
    assert volume["configMap"] == {"name": MATERIALIZER_TEMPLATE_CONFIGMAP}
    assert "template.yaml" in chart.get("ConfigMap", MATERIALIZER_TEMPLATE_CONFIGMAP, NAMESPACE)["data"]


# ----- the configuration in the API emulator --------------------------------------------------------


class RecordingWebhook(WebhookListener):
    """The controller Service's webhook listener as the apiserver meets it: HTTPS with the rendered
    certificate on 127.0.0.1 (port 0); allows every review and records it."""

    def __init__(self, workdir: Path, cert: Mapping[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "tls.crt").write_text(cert["crt"])
        (workdir / "tls.key").write_text(cert["key"])
        super().__init__(
            cert_file=workdir / "tls.crt",
            key_file=workdir / "tls.key",
            respond=lambda request: {"uid": request["uid"], "allowed": True},
        )

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """(path, request) of every review so far."""
        return [(path, review["request"]) for path, review in zip(self.paths, self.reviews, strict=True)]

    def seen(self) -> list[tuple[str, str, str, str]]:
        """(operation, kind, namespace, name) of every review so far, then forgets them."""
        calls = [
            (request["operation"], request["kind"]["kind"], request["namespace"], request["name"])
            for _, request in self.calls
        ]
        self.reviews.clear()
        self.paths.clear()
        return calls


@pytest.fixture
def gated(
    kube_emulator: RunningEmulator, tmp_path: Path
) -> Iterator[tuple[RunningEmulator, RecordingWebhook]]:
    """The emulator with the rendered configuration, the controller Service routed to a recorder,
    and two namespaces labelled as the apiserver labels every namespace."""
    chart = rendered(WITH_CERT.name)
    recorder = RecordingWebhook(tmp_path / "webhook", WITH_CERT.internal["controllerCert"])
    try:
        service = the_webhook(chart)["clientConfig"]["service"]
        kube_emulator.route_service(service["namespace"], service["name"], recorder.port)
        for namespace in (NAMESPACE, WORKLOAD_NAMESPACE):
            kube_emulator.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": namespace, "labels": {"kubernetes.io/metadata.name": namespace}},
                }
            )
        (configuration,) = webhook_configurations(chart)
        stored = kube_emulator.apply(configuration)
        assert stored["webhooks"][0]["matchConditions"] == configuration["webhooks"][0]["matchConditions"]
        yield kube_emulator, recorder
    finally:
        recorder.close()


POD_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "server"}},
    "spec": {"containers": [{"name": "server", "image": "registry.example.com/server:1"}]},
}


def workload(
    kind: str, name: str, annotations: Mapping[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    template = copy.deepcopy(POD_TEMPLATE)
    spec: dict[str, Any]
    if kind == "CronJob":
        template["spec"]["restartPolicy"] = "Never"
        spec = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
        api_version = "batch/v1"
    elif kind == "Job":
        template["spec"]["restartPolicy"] = "Never"
        spec = {"template": template}
        api_version = "batch/v1"
    else:
        spec = {"selector": {"matchLabels": {"app": "server"}}, "template": template}
        api_version = "apps/v1"
        if kind == "StatefulSet":
            spec["serviceName"] = name
    metadata: dict[str, Any] = {"name": name, "namespace": meta.pop("namespace", WORKLOAD_NAMESPACE), **meta}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def replace(emulator: RunningEmulator, manifest: dict[str, Any]) -> None:
    """An UPDATE (PUT) of the Deployment at its current resourceVersion; `apply` would POST first,
    which is a CREATE the webhook sees before the apiserver finds the object exists."""
    meta = manifest["metadata"]
    path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
    status, _, current = emulator.request("GET", path)
    assert status == 200, current
    meta["resourceVersion"] = current["metadata"]["resourceVersion"]
    status, _, body = emulator.request("PUT", path, body=manifest)
    assert status == 200, body.get("message") if isinstance(body, dict) else body


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "CronJob"])
@pytest.mark.parametrize("annotation", [MODEL_ANNOTATION, CLUSTER_MODEL_ANNOTATION])
def test_a_workload_that_names_a_model_reaches_the_webhook_at_create(
    gated: tuple[RunningEmulator, RecordingWebhook], kind: str, annotation: str
) -> None:
    emulator, recorder = gated
    emulator.apply(workload(kind, "server", {annotation: "llama"}))
    assert recorder.seen() == [("CREATE", kind, WORKLOAD_NAMESPACE, "server")]
    assert {path.split("?", 1)[0] for path, _ in recorder.calls} <= {DELIVERY_WEBHOOK_PATH}


def test_the_webhook_is_called_on_the_path_the_controller_serves(
    gated: tuple[RunningEmulator, RecordingWebhook],
) -> None:
    emulator, recorder = gated
    emulator.apply(workload("Deployment", "server", {MODEL_ANNOTATION: "llama"}))
    ((path, request),) = recorder.calls
    assert path.split("?", 1)[0] == DELIVERY_WEBHOOK_PATH
    assert request["oldObject"] is None
    assert request["object"]["metadata"]["annotations"] == {MODEL_ANNOTATION: "llama"}


@pytest.mark.parametrize(
    "annotations",
    [
        None,
        {},
        {"example.com/owner": "team-a"},
        # The module's own delivery report is not a request for a model.
        {DELIVERY_REASON_ANNOTATION: "Delivered", DELIVERY_MESSAGE_ANNOTATION: "ok"},
        {f"{MODEL_ANNOTATION}s": "llama", f"x.{CLUSTER_MODEL_ANNOTATION}": "llama"},
    ],
    ids=["no-annotations", "empty", "unrelated", "delivery-report", "look-alike-keys"],
)
def test_a_workload_that_names_no_model_is_never_sent(
    gated: tuple[RunningEmulator, RecordingWebhook], annotations: dict[str, str] | None
) -> None:
    emulator, recorder = gated
    emulator.apply(workload("Deployment", "plain", annotations))
    replace(emulator, workload("Deployment", "plain", annotations, labels={"tier": "web"}))
    assert recorder.seen() == []


def test_an_update_is_sent_while_the_new_or_the_old_object_names_a_model(
    gated: tuple[RunningEmulator, RecordingWebhook],
) -> None:
    emulator, recorder = gated
    unrelated = {"example.com/owner": "team-a"}
    update = [("UPDATE", "Deployment", WORKLOAD_NAMESPACE, "server")]
    emulator.apply(workload("Deployment", "server", unrelated))
    assert recorder.seen() == []
    # Added by an update: the new object names a model.
    replace(emulator, workload("Deployment", "server", {**unrelated, CLUSTER_MODEL_ANNOTATION: "llama"}))
    assert recorder.seen() == update
    # Any change while it names one.
    named = {**unrelated, CLUSTER_MODEL_ANNOTATION: "llama"}
    replace(emulator, workload("Deployment", "server", named, labels={"tier": "web"}))
    assert recorder.seen() == update
    # Removed: only the old object names a model, and the webhook must see it to take the
    # module's part of the template away in the same write.
    replace(emulator, workload("Deployment", "server", unrelated))
    ((_, request),) = recorder.calls
    assert request["object"]["metadata"]["annotations"] == unrelated
    assert request["oldObject"]["metadata"]["annotations"][CLUSTER_MODEL_ANNOTATION] == "llama"
    assert recorder.seen() == update
    # Removed with every other annotation: the new object has no metadata.annotations at all.
    replace(emulator, workload("Deployment", "server", {MODEL_ANNOTATION: "llama"}))
    assert recorder.seen() == update
    replace(emulator, workload("Deployment", "server"))
    ((_, request),) = recorder.calls
    assert "annotations" not in request["object"]["metadata"]
    assert recorder.seen() == update
    # From then on neither the new nor the old object names one.
    replace(emulator, workload("Deployment", "server", labels={"tier": "db"}))
    assert recorder.seen() == []


def test_other_kinds_and_the_module_namespace_are_never_sent(
    gated: tuple[RunningEmulator, RecordingWebhook],
) -> None:
    emulator, recorder = gated
    annotations = {MODEL_ANNOTATION: "llama"}
    emulator.apply(workload("Job", "batch", annotations))
    emulator.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "config", "namespace": WORKLOAD_NAMESPACE, "annotations": annotations},
            "data": {},
        }
    )
    emulator.apply(workload("Deployment", "own", annotations, namespace=NAMESPACE))
    assert recorder.seen() == []


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [("kube-system", {}), ("kube-node-lease", {}), ("d8-monitoring", {"heritage": "deckhouse"})],
)
def test_the_clusters_and_deckhouses_namespaces_are_never_sent(
    gated: tuple[RunningEmulator, RecordingWebhook], namespace: str, labels: dict[str, str]
) -> None:
    emulator, recorder = gated
    emulator.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"kubernetes.io/metadata.name": namespace, **labels}},
        }
    )
    emulator.apply(workload("Deployment", "system", {MODEL_ANNOTATION: "llama"}, namespace=namespace))
    assert recorder.seen() == []
    emulator.apply(workload("Deployment", "server", {MODEL_ANNOTATION: "llama"}))
    assert recorder.seen() == [("CREATE", "Deployment", WORKLOAD_NAMESPACE, "server")], "the webhook answers"
