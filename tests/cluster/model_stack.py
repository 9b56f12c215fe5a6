"""A publication stack for cluster tests: the emulator with the module's rendered RBAC, a fake Hub,
a moto S3 bucket, the controller and the api as real processes, and the test bed's Job runner
running publish Jobs exactly as the controller builds them from the Helm-rendered pod template.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as typed_client

from ai_models.domain.secret_reads import grant_objects
from fakes.hub import FakeHub
from fakes.s3 import S3Bucket
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually
from support.module_install import MODULE_NAMESPACE, InstalledModule, install_module
from support.module_tls import with_internal_tls
from support.processes import ModuleProcess
from support.render import RenderedChart, render_chart
from support.tcpproxy import TcpProxy
from support.tls_files import write_tls_files
from support.values import module_values
from testbed.access_levels import grant_access_level
from testbed.jobrunner import JobRunner
from testbed.module import module_job_runner

client: Any = typed_client
GROUP, VERSION = "ai.deckhouse.io", "v1alpha1"
USER_NAMESPACE = "team-a"


@dataclasses.dataclass
class ModelStack:
    module: InstalledModule
    hub: FakeHub
    bucket: S3Bucket
    workdir: Path
    template_file: Path
    runner: JobRunner
    capacity_limit: str | None
    store_proxy: TcpProxy
    chart: RenderedChart
    processes: list[ModuleProcess] = dataclasses.field(default_factory=list)
    api_port: int | None = None
    replicas: dict[str, ModuleProcess] = dataclasses.field(default_factory=dict)
    api_ports: dict[str, int] = dataclasses.field(default_factory=dict)
    # With internal TLS: the api's internal listener (certificate, key, CA) for 127.0.0.1, where
    # the node plugin and the materializers read the serving API, and the port api-0 bound (D159).
    api_tls: tuple[Path, Path, Path] | None = None
    internal_api_port: int | None = None
    _uploader: Identity | None = None

    @property
    def emulator(self) -> RunningEmulator:
        return self.module.emulator

    @property
    def objects(self) -> Any:
        return client.CustomObjectsApi(self.emulator.api_client())

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.emulator.api_client())

    def common_env(self) -> dict[str, str]:
        env = {
            **self.bucket.process_env(),
            # Through the proxy, so a test can take the store away (`store_proxy.block()`).
            "AI_MODELS_S3_ENDPOINT": self.store_proxy.url("http"),
            "AI_MODELS_HF_ENDPOINT": self.hub.url,
            "AI_MODELS_NAMESPACE": MODULE_NAMESPACE,
        }
        if self.capacity_limit is not None:
            env["AI_MODELS_CAPACITY_LIMIT_BYTES"] = self.capacity_limit
        return env

    def controller(self, replica: str = "controller-0", **env: str) -> ModuleProcess:
        api_base = f"http://127.0.0.1:{self.api_port}" if self.api_port else "http://127.0.0.1:1"
        process = ModuleProcess(
            "controller",
            env={
                **self.common_env(),
                "KUBECONFIG": str(self.module.kubeconfig("controller")),
                "AI_MODELS_POD_NAME": replica,
                # Port 0: the listeners log the ports they bound (`ModuleProcess.bound_port`).
                "AI_MODELS_CONTROLLER_HEALTH_PORT": "0",
                "AI_MODELS_CONTROLLER_METRICS_PORT": "0",
                # Short leases keep fail-over tests quick, yet a renewal slowed by a loaded machine (its
                # read timeout is renew deadline - retry period = 5 s) must not end the leadership: a
                # controller that loses the Lease exits, and this stack, unlike a Deployment, does not
                # start it again. The production values come from Helm.
                "AI_MODELS_CONTROLLER_LEASE_DURATION_SECONDS": "8",
                "AI_MODELS_CONTROLLER_RENEW_DEADLINE_SECONDS": "6",
                "AI_MODELS_CONTROLLER_RETRY_PERIOD_SECONDS": "1",
                "AI_MODELS_PUBLISH_POD_TEMPLATE_FILE": str(self.template_file),
                "AI_MODELS_PUBLICATION_RETRY_SECONDS": "2",
                "AI_MODELS_UPLOAD_POLL_SECONDS": "0.3",
                "AI_MODELS_UPLOAD_IN_CLUSTER_URL": api_base,
                "AI_MODELS_MODEL_RESYNC_SECONDS": "5",
                **env,
            },
            log_path=self.workdir / f"{replica}.log",
        ).start()
        self.processes.append(process)
        self.replicas[replica] = process
        return process

    def api(self, replica: str = "api-0", **env: str) -> ModuleProcess:
        """An api replica; the first ("api-0") is the one the controller's upload URLs point at.

        It binds port 0 and the stack reads the port it got from its log; "api-0" started again
        takes the port it had, so the upload URLs a controller already handed out stay valid."""
        port = self.api_port if replica == "api-0" and self.api_port else 0
        if self.api_tls is not None:
            cert, key, _ = self.api_tls
            internal = self.internal_api_port if replica == "api-0" and self.internal_api_port else 0
            env = {
                "AI_MODELS_API_TLS_CERT_FILE": str(cert),
                "AI_MODELS_API_TLS_KEY_FILE": str(key),
                "AI_MODELS_API_INTERNAL_PORT": str(internal),
                **env,
            }
        process = ModuleProcess(
            "api",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            env={
                **self.common_env(),
                "KUBECONFIG": str(self.module.kubeconfig("api")),
                "AI_MODELS_POD_NAME": replica,
                "AI_MODELS_API_METRICS_PORT": "0",
                "AI_MODELS_API_INDEX_DIR": str(
                    self.workdir / ("api-index" if replica == "api-0" else f"{replica}-index")
                ),
                **env,
            },
            log_path=self.workdir / ("api.log" if replica == "api-0" else f"{replica}.log"),
        ).start()
        self.processes.append(process)
        self.replicas[replica] = process
        # It listens before it logs the line (tests talk to it at once); on a loaded machine its
        # start-up takes a while.
        self.api_ports[replica] = process.api_port()
        if replica == "api-0":
            self.api_port = self.api_ports[replica]
            if self.api_tls is not None:
                self.internal_api_port = process.internal_api_port()
        return process

    @property
    def internal_api_url(self) -> str:
        """The serving API as the node plugin and the materializers read it: api-0's TLS listener."""
        assert self.internal_api_port, "start the api of a stack with internal TLS first"
        return f"https://127.0.0.1:{self.internal_api_port}"

    @property
    def api_ca_file(self) -> Path:
        assert self.api_tls is not None, "the stack has no internal TLS"
        return self.api_tls[2]

    def metrics(self, replica: str = "controller-0") -> dict[str, float]:
        """The replica's metrics as `name{labels}` -> value (Prometheus text format)."""
        url = f"http://127.0.0.1:{self.replicas[replica].metrics_port()}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    # ----- objects -------------------------------------------------------------------------------

    def create_model(
        self, name: str, source: dict[str, Any], *, namespace: str = USER_NAMESPACE
    ) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Model",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": source},
        }
        created: dict[str, Any] = self.objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "models", body
        )
        return created

    def create_cluster_model(self, name: str, source: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterModel",
            "metadata": {"name": name},
            "spec": {"source": source},
        }
        created: dict[str, Any] = self.objects.create_cluster_custom_object(
            GROUP, VERSION, "clustermodels", body
        )
        return created

    def model(self, name: str, *, namespace: str | None = USER_NAMESPACE) -> dict[str, Any] | None:
        try:
            if namespace is None:
                found = self.objects.get_cluster_custom_object(GROUP, VERSION, "clustermodels", name)
            else:
                found = self.objects.get_namespaced_custom_object(GROUP, VERSION, namespace, "models", name)
        except client.exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        result: dict[str, Any] = found
        return result

    def status(self, name: str, *, namespace: str | None = USER_NAMESPACE) -> dict[str, Any]:
        return dict((self.model(name, namespace=namespace) or {}).get("status") or {})

    def condition(self, name: str, type_: str, *, namespace: str | None = USER_NAMESPACE) -> dict[str, Any]:
        for item in self.status(name, namespace=namespace).get("conditions") or []:
            if item["type"] == type_:
                return dict(item)
        return {}

    def wait_phase(
        self, name: str, phase: str, *, namespace: str | None = USER_NAMESPACE, timeout: float = 60
    ) -> dict[str, Any]:
        self.eventually(
            lambda: self.status(name, namespace=namespace).get("phase") == phase,
            timeout=timeout,
            what=f"{name} in phase {phase} (now {self.status(name, namespace=namespace)})",
        )
        return self.status(name, namespace=namespace)

    def events(self, reason: str, *, name: str | None = None) -> list[Any]:
        listed = self.core.list_event_for_all_namespaces()
        return [
            event
            for event in listed.items
            if event.reason == reason and (name is None or event.involved_object.name == name)
        ]

    def jobs(self) -> list[str]:
        listed = client.BatchV1Api(self.emulator.api_client()).list_namespaced_job(MODULE_NAMESPACE)
        return [job.metadata.name for job in listed.items]

    def secret(self, name: str, namespace: str, data: dict[str, str]) -> None:
        self.core.create_namespaced_secret(
            namespace, {"metadata": {"name": name, "namespace": namespace}, "stringData": data}
        )

    def grant_secret_read(self, name: str, namespace: str) -> None:
        """What the namespace's admin does for a Secret the controller must read (D160): the Role
        and RoleBinding that let it `get` that one Secret."""
        for obj in grant_objects(namespace, name):
            self.emulator.cluster.apply(obj)

    # ----- store and ledger ----------------------------------------------------------------------

    def s3(self) -> Any:
        return self.bucket.server.client()

    def keys(self, prefix: str = "") -> dict[str, int]:
        found: dict[str, int] = {}
        for page in (
            self.s3().get_paginator("list_objects_v2").paginate(Bucket=self.bucket.name, Prefix=prefix)
        ):
            for item in page.get("Contents", []):
                found[item["Key"]] = int(item["Size"])
        return found

    def stored_artifact_bytes(self) -> int:
        return sum(self.keys("artifacts/").values())

    def ledger(self) -> dict[str, Any] | None:
        try:
            secret = self.core.read_namespaced_secret("ai-models-storage-accounting", MODULE_NAMESPACE)
        except client.exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        encoded = (secret.data or {}).get("ledger.json")
        if not encoded:
            return None
        document: dict[str, Any] = json.loads(base64.b64decode(encoded))
        return document

    def uploader(self, level: str = "ClusterEditor", *, namespace: str | None = None) -> Identity:
        """A subject with an access level (default: may update every Model and ClusterModel)."""
        name = f"uploader-{level.lower()}-{namespace or 'cluster'}"
        identity = self.emulator.add_identity(Identity(name=name, token=new_token(), groups=("team",)))
        grant_access_level(self.emulator.cluster, identity, level, namespace=namespace)
        return identity

    def upload(
        self,
        name: str,
        payload: bytes,
        *,
        namespace: str | None = USER_NAMESPACE,
        filename: str | None = None,
        url: str | None = None,
        token: str | None = None,
    ) -> int:
        """PUT `payload` to the object's upload URL as `token`'s subject (by default one allowed to)."""
        url = url or self.status(name, namespace=namespace)["upload"]["inCluster"]
        if filename:
            url += f"?filename={filename}"
        if token is None:
            self._uploader = self._uploader or self.uploader()
            token = self._uploader.token
        request = urllib.request.Request(
            url,
            data=payload,
            method="PUT",
            headers={"Content-Length": str(len(payload)), "Authorization": f"Bearer {token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    # ----- waiting -------------------------------------------------------------------------------

    def eventually(
        self, check: Callable[[], bool], *, timeout: float = 60, what: str | Callable[[], str]
    ) -> None:
        def described() -> str:
            logs = "\n".join(
                f"--- {process.name} ({process.log_path.name})\n{process.log()[-4000:]}"
                for process in self.processes
            )
            return f"{what() if callable(what) else what}\n{logs}"

        eventually(check, timeout=timeout, message=described)

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_stack(
    emulator: RunningEmulator,
    hub: FakeHub,
    bucket: S3Bucket,
    workdir: Path,
    *,
    capacity_limit: str | None = None,
    extra_settings: Mapping[str, Any] | None = None,
    internal_tls: bool = False,
) -> Iterator[ModelStack]:
    """With `internal_tls`, the chart is rendered with the certificates the internal TLS hook
    issues (the controller's admission webhook needs them), and the api serves its internal TLS
    listener on 127.0.0.1 with a test CA's certificate (the hook's names the Service, not 127.0.0.1)."""
    settings: dict[str, Any] = {
        "artifacts": {
            "bucket": bucket.name,
            "endpoint": bucket.server.endpoint_url,
            "credentialsSecretName": "ai-models-s3",
        },
        "sources": {"huggingFace": {"endpoint": hub.url}},
    }
    if capacity_limit is not None:
        settings["artifacts"]["capacityLimit"] = capacity_limit
    moto_port = int(bucket.server.endpoint_url.rsplit(":", 1)[1])
    proxy = TcpProxy("127.0.0.1", moto_port).start()
    settings["artifacts"]["endpoint"] = proxy.url("http")
    settings.update(copy.deepcopy(dict(extra_settings or {})))
    values = module_values(settings)
    chart = render_chart(with_internal_tls(values) if internal_tls else values)
    module = install_module(emulator, rendered=chart)
    env = bucket.process_env()
    # What the hook copies from artifacts.credentialsSecretName in a cluster.
    client.CoreV1Api(emulator.api_client()).create_namespaced_secret(
        MODULE_NAMESPACE,
        {
            "metadata": {"name": "ai-models-artifacts-credentials", "namespace": MODULE_NAMESPACE},
            "stringData": {"accessKey": env["AWS_ACCESS_KEY_ID"], "secretKey": env["AWS_SECRET_ACCESS_KEY"]},
        },
    )
    client.CoreV1Api(emulator.api_client()).create_namespace({"metadata": {"name": USER_NAMESPACE}})
    config_map = chart.get("ConfigMap", "ai-models-publisher-template", MODULE_NAMESPACE)
    template_file = workdir / "publisher-template.yaml"
    template_file.write_text(config_map["data"]["template.yaml"])
    image = yaml.safe_load(template_file.read_text())["spec"]["containers"][0]["image"]
    runner = module_job_runner(emulator, image=image, workdir=workdir / "jobs")
    stack = ModelStack(
        module=module,
        hub=hub,
        bucket=bucket,
        workdir=workdir,
        template_file=template_file,
        runner=runner,
        capacity_limit=capacity_limit,
        store_proxy=proxy,
        chart=chart,
        api_tls=write_tls_files(workdir / "api-tls") if internal_tls else None,
    )
    try:
        yield stack
    finally:
        stack.stop_all()
        runner.close()
        proxy.stop()
