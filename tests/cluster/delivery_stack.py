"""A SharedPVC delivery stack for cluster tests: the publication stack (`model_stack`: emulator with
the module's RBAC, fake Hub, moto S3, controller and api as real processes, the Job runner) plus
what delivery needs from a cluster:

- the chart rendered with the internal TLS hook's certificates, and its MutatingWebhookConfiguration
  applied, so the emulator calls the controller's webhook over HTTPS with the module CA as the
  API server would (the controller Service is routed to the port the replica bound);
- the test bed's cluster simulation (Deployment/StatefulSet/DaemonSet/CronJob controllers, the
  scheduler, a provisioner per StorageClass), which leaves the module image's Jobs to the runner:
  materialize Jobs run as real `ai-models materialize` processes writing into the claim's directory;
- the materializer pod template from the rendered ConfigMap, and the module's image pull Secret.

Workloads are created over the API (`apply_workload`), so the webhook sees them.

A test file whose tests need no pristine cluster shares one stack (`shared_delivery_stack`, a
module fixture: emulator, fake Hub, moto S3, api and controller started once) and gives each test
a namespace of its own (`fresh_namespace`): the stack's helpers default to `DeliveryStack.namespace`,
so a test's claims, Jobs, Pods, Events and Models are only its own (D118).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import enum
import hashlib
import itertools
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client as typed_client

from ai_models import names
from cluster.model_stack import USER_NAMESPACE, ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, repository
from fakes.model_files import safetensors_bytes
from fakes.s3 import S3Bucket, fresh_bucket_name, start_moto_server
from kubeemu.pytest_fixtures import REPO_CRDS, RunningEmulator, start_emulator
from support.module_install import MODULE_NAMESPACE
from support.processes import ModuleProcess
from support.tcpproxy import TcpProxy
from testbed.module import module_cluster_simulation
from testbed.mounts import ClaimMount
from testbed.simulation import ClusterSimulation
from testbed.volumes import StorageClassBehaviour

client: Any = typed_client
# The small model most delivery tests publish from the fake Hub (`fake_hub_corpus = [TINY]`).
CONFIG = (
    b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
    b'"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 256, "torch_dtype": "bfloat16"}'
)
TINY_FILES = {
    "config.json": CONFIG,
    "model.safetensors": safetensors_bytes(
        {"model.embed_tokens.weight": ("BF16", (256, 64)), "lm_head.weight": ("BF16", (256, 64))}
    ),
    "tokenizer.json": b'{"version": "1.0"}',
}
TINY = repository("acme/tiny-llama", TINY_FILES)
WEBHOOK_LISTENING = "serving the admission webhook"
RWX_CLASS = StorageClassBehaviour(name="rwx", default=True)
# The module's pull secret under the name the chart gives it (ai_models.registry_secret_name): the
# only name its Role lets the controller read (D160).
REGISTRY_SECRET = "ai-models-module-registry"
DOCKER_CONFIG = b'{"auths": {"registry.example": {"auth": "dXNlcjpwYXNz"}}}'
REPORT_REASON = names.DELIVERY_REASON_ANNOTATION
REPORT_MESSAGE = names.DELIVERY_MESSAGE_ANNOTATION
# Namespaces `fresh_namespace` hands out: team-a-1, team-a-2, ... (unique in the test process).
_NAMESPACE_NUMBERS = itertools.count(1)


class Scope(enum.Enum):
    # `ready_model`'s default: a Model in the stack's namespace (None there means a ClusterModel).
    STACK_NAMESPACE = enum.auto()


@dataclasses.dataclass
class DeliveryStack:
    models: ModelStack
    simulation: ClusterSimulation
    cert_dir: Path
    materializer_template: Path
    # Where the helpers look and `ready_model` publishes unless told otherwise.
    namespace: str = USER_NAMESPACE
    # The shared stack's api reads the store through this proxy: a test slows the copies it serves
    # with `api_store.rate` (and sets it back to None).
    api_store: TcpProxy | None = None

    @property
    def emulator(self) -> RunningEmulator:
        return self.models.emulator

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.emulator.api_client())

    @property
    def core(self) -> Any:
        return self.models.core

    @property
    def batch(self) -> Any:
        return client.BatchV1Api(self.emulator.api_client())

    def api(self) -> ModuleProcess:
        return self.models.api()

    def controller(self, replica: str = "controller-0", **env: str) -> ModuleProcess:
        """A controller replica serving the webhook; the controller Service leads to it from now on."""
        assert self.models.api_port, "start the api first: materializers read from it"
        process = self.models.controller(
            replica,
            AI_MODELS_CONTROLLER_WEBHOOK_CERT_DIR=str(self.cert_dir),
            AI_MODELS_CONTROLLER_WEBHOOK_PORT="0",
            AI_MODELS_CONTROLLER_WEBHOOK_ADDRESS="127.0.0.1",
            # The api's internal TLS listener and the CA the controller copies into each Job's token
            # Secret, as in the cluster (D159).
            AI_MODELS_DELIVERY_API_URL=self.models.internal_api_url,
            AI_MODELS_DELIVERY_API_CA_FILE=str(self.models.api_ca_file),
            AI_MODELS_DELIVERY_MATERIALIZER_TEMPLATE_FILE=str(self.materializer_template),
            AI_MODELS_DELIVERY_REGISTRY_SECRET=REGISTRY_SECRET,
            AI_MODELS_DELIVERY_MATERIALIZATION_RETRY_SECONDS="2",
            **env,
        )
        self.route_webhook_to(process)
        return process

    def route_webhook_to(self, process: ModuleProcess) -> None:
        port = process.bound_port(WEBHOOK_LISTENING)
        self.emulator.route_service(MODULE_NAMESPACE, names.CONTROLLER_SERVICE, port)

    # ----- models --------------------------------------------------------------------------------

    def ready_model(
        self,
        name: str,
        repo: str,
        *,
        namespace: str | Scope | None = Scope.STACK_NAMESPACE,
        timeout: float = 90,
    ) -> dict[str, Any]:
        """A Model (or ClusterModel, namespace None) published from the fake Hub, once Ready."""
        if namespace is Scope.STACK_NAMESPACE:
            namespace = self.namespace
        source = {"url": f"https://huggingface.co/{repo}"}
        if namespace is None:
            self.models.create_cluster_model(name, source)
        else:
            self.models.create_model(name, source, namespace=namespace)
        return self.models.wait_phase(name, "Ready", namespace=namespace, timeout=timeout)

    # ----- workloads -----------------------------------------------------------------------------

    def apply_workload(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create (or replace) the workload over the API, through the admission webhook."""
        return self.emulator.apply(dict(manifest))

    def workload(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        namespace = namespace or self.namespace
        return self._get(f"/apis/{_api_version(kind)}/namespaces/{namespace}/{kind.lower()}s/{name}")

    def _get(self, path: str) -> dict[str, Any]:
        status, _, body = self.emulator.request("GET", path)
        assert status == 200, (path, status, body)
        assert isinstance(body, dict)
        return body

    def _items(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        return list(self._get(path + query).get("items") or [])

    def report(self, kind: str, name: str, namespace: str | None = None) -> tuple[str, str]:
        annotations = self.workload(kind, name, namespace)["metadata"].get("annotations") or {}
        return str(annotations.get(REPORT_REASON) or ""), str(annotations.get(REPORT_MESSAGE) or "")

    def wait_reason(
        self, kind: str, name: str, reason: str, *, namespace: str | None = None, timeout: float = 90
    ) -> str:
        """Wait for the delivery report's reason; its message."""
        namespace = namespace or self.namespace
        self.models.eventually(
            lambda: self.report(kind, name, namespace)[0] == reason,
            timeout=timeout,
            what=lambda: (
                f"{kind} {namespace}/{name} reports {reason}; now {self.report(kind, name, namespace)}"
            ),
        )
        return self.report(kind, name, namespace)[1]

    def describe(self, namespace: str | None = None) -> str:
        """The delivery's objects in `namespace`, one line each, for failure messages."""
        namespace = namespace or self.namespace
        lines = []
        for claim in self.claims(namespace):
            lines.append(f"claim {claim['metadata']['name']}: {claim.get('status')}")
        for job in self.jobs(namespace):
            lines.append(f"job {job['metadata']['name']}: {job.get('status')}")
        pods = self.pods(namespace)
        for pod in pods[:10]:
            lines.append(
                f"pod {pod['metadata']['name']}: gates {pod['spec'].get('schedulingGates')} "
                f"status {pod.get('status')}"
            )
        lines.append(f"{len(pods)} pods")
        return "\n".join(lines)

    def pods(self, namespace: str | None = None, selector: str | None = None) -> list[dict[str, Any]]:
        return self._items(f"/api/v1/namespaces/{namespace or self.namespace}/pods", selector)

    def replica_sets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._items(f"/apis/apps/v1/namespaces/{namespace or self.namespace}/replicasets")

    def claims(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._items(f"/api/v1/namespaces/{namespace or self.namespace}/persistentvolumeclaims")

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self._items(f"/apis/batch/v1/namespaces/{namespace or self.namespace}/jobs")

    def materialization_secrets(self, namespace: str | None = None) -> list[str]:
        """Names of the Secrets beside materialize Jobs (delivery token, image pull copy)."""
        selector = f"{names.COMPONENT_LABEL}={names.MATERIALIZATION_COMPONENT}"
        return [
            item["metadata"]["name"]
            for item in self._items(f"/api/v1/namespaces/{namespace or self.namespace}/secrets", selector)
        ]

    def mounts(self, pod: Mapping[str, Any]) -> list[ClaimMount]:
        return self.simulation.pod_mounts(pod)

    def delivered_files(self, pod: Mapping[str, Any], model: str) -> dict[str, str]:
        """relative path -> sha256 of what the pod would see at /data/modelcache/models/<model>."""
        wanted = f"{names.MODELS_DIR}/{model}"
        for mount in self.mounts(pod):
            if mount.mount_path == wanted and mount.host_path is not None:
                return tree_digests(mount.host_path)
        return {}


def digests(files: Mapping[str, bytes]) -> dict[str, str]:
    """relative path -> sha256, as `delivered_files` reports a tree."""
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


def tree_digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _api_version(kind: str) -> str:
    return "batch/v1" if kind == "CronJob" else "apps/v1"


def deployment(
    name: str,
    *,
    models: str | None = None,
    cluster_models: str | None = None,
    namespace: str = USER_NAMESPACE,
    replicas: int = 1,
    image: str = "registry.example/inference:1",
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if models is not None:
        annotations[names.MODEL_ANNOTATION] = models
    if cluster_models is not None:
        annotations[names.CLUSTER_MODEL_ANNOTATION] = cluster_models
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": image}]},
            },
        },
    }


def delivery_stack(
    emulator: RunningEmulator,
    hub: FakeHub,
    bucket: S3Bucket,
    workdir: Path,
    *,
    classes: Sequence[StorageClassBehaviour] = (RWX_CLASS,),
    settings: Mapping[str, Any] | None = None,
    registry_secret: bool = True,
    simulation: Callable[..., ClusterSimulation] | None = None,
) -> Iterator[DeliveryStack]:
    for models in model_stack(
        emulator,
        hub,
        bucket,
        workdir,
        extra_settings={"delivery": {"mode": "SharedPVC", **dict((settings or {}).get("delivery") or {})}},
        internal_tls=True,
    ):
        chart = models.chart
        emulator.cluster.apply(
            chart.get("MutatingWebhookConfiguration", names.DELIVERY_WEBHOOK_CONFIGURATION, None)
        )
        tls = chart.get("Secret", names.CONTROLLER_TLS_SECRET, MODULE_NAMESPACE)
        cert_dir = workdir / "webhook-tls"
        cert_dir.mkdir()
        for key in ("tls.crt", "tls.key"):
            (cert_dir / key).write_bytes(base64.b64decode(tls["data"][key]))
        config_map = chart.get("ConfigMap", names.MATERIALIZER_TEMPLATE_CONFIGMAP, MODULE_NAMESPACE)
        template = workdir / "materializer-template.yaml"
        template.write_text(config_map["data"]["template.yaml"])
        if registry_secret:
            models.core.create_namespaced_secret(
                MODULE_NAMESPACE,
                {
                    "metadata": {"name": REGISTRY_SECRET, "namespace": MODULE_NAMESPACE},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": base64.b64encode(DOCKER_CONFIG).decode()},
                },
            )
        sim = (simulation or module_cluster_simulation)(
            emulator, classes=classes, workdir=workdir / "volumes"
        )
        try:
            yield DeliveryStack(
                models=models, simulation=sim, cert_dir=cert_dir, materializer_template=template
            )
        finally:
            models.stop_all()
            sim.close()


@contextlib.contextmanager
def shared_delivery_stack(
    workdir: Path,
    corpus: Sequence[FakeModel],
    *,
    controller_env: Mapping[str, str] | None = None,
    classes: Sequence[StorageClassBehaviour] = (RWX_CLASS,),
) -> Iterator[DeliveryStack]:
    """One delivery stack for a whole test file, its api and controller running: a module fixture
    enters it, each test takes a namespace of its own from it (`fresh_namespace`).

    It has its own emulator, fake Hub and moto server (not the session's `moto_s3`, which the
    function fixture `s3_bucket` wipes after every test that uses it, in this file too)."""
    with contextlib.ExitStack() as started:
        emulator = start_emulator(workdir / "emulator", crd_dirs=[REPO_CRDS])
        started.callback(emulator.close)
        hub = started.enter_context(FakeHub(corpus))
        server = started.enter_context(start_moto_server(workdir / "moto"))
        bucket = S3Bucket(name=fresh_bucket_name(), server=server)
        server.create_bucket(bucket.name)
        stack_dir = workdir / "stack"
        stack_dir.mkdir(parents=True)
        stack = started.enter_context(
            contextlib.contextmanager(delivery_stack)(emulator, hub, bucket, stack_dir, classes=classes)
        )
        api_store = TcpProxy("127.0.0.1", int(server.endpoint_url.rsplit(":", 1)[1])).start()
        started.callback(api_store.stop)
        stack.api_store = api_store
        stack.models.api(AI_MODELS_S3_ENDPOINT=api_store.url("http"))
        stack.controller(**dict(controller_env or {}))
        yield stack


def fresh_namespace(shared: DeliveryStack) -> Iterator[DeliveryStack]:
    """The shared stack seen from a new namespace (for a function fixture): the test's workloads,
    Models, claims and Jobs live there, so what it counts is its own. Afterwards the Job runner
    makes Pods again and the api reads at full speed, whatever the test paused or slowed; the
    namespace's objects stay, idle, until the stack stops (deleting them would put work beside the
    next test)."""
    namespace = f"{USER_NAMESPACE}-{next(_NAMESPACE_NUMBERS)}"
    shared.core.create_namespace({"metadata": {"name": namespace}})
    try:
        yield dataclasses.replace(shared, namespace=namespace)
    finally:
        shared.models.runner.resume()
        if shared.api_store is not None:
            shared.api_store.rate = None
