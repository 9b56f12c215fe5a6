"""The delivery controller in the test process on the API emulator, with the cluster simulation
(workload controllers, scheduler and kubelets, an Immediate ReadWriteMany default class), a Job
runner that runs the REAL `ai-models materialize` for the materializer image, and the api (the real
app under uvicorn, as its own ServiceAccount) serving a directory store.

    stack = start_delivery(limit=1)               # delivery.maxConcurrentMaterializations
    stack.deployment("web", models="llama")      # applied as the admission webhook would leave it
    stack.report("web")                           # the (reason, message) annotations
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.server import BackgroundServer, build_runtime
from ai_models.api.settings import ApiSettings
from ai_models.controller.delivery.jobs import MATERIALIZER_CONTAINER
from ai_models.controller.delivery.observe import observation
from ai_models.controller.delivery.runtime import DeliveryRuntime
from ai_models.controller.delivery.shared_pvc import SharedPVCDelivery, SharedPVCSettings
from ai_models.controller.prerequisites import read_inputs
from ai_models.controller.runtime import Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.claim_facts import ClaimFacts
from ai_models.domain.delivery.claims import claim_storage_class
from ai_models.domain.delivery.modes.shared_pvc import SharedPVC
from ai_models.domain.delivery.verdict import admit
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_MESSAGE_ANNOTATION,
    DELIVERY_REASON_ANNOTATION,
    MODEL_ANNOTATION,
    MODULE_NAMESPACE,
    MaterializeVariable,
    ModelKind,
)
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import install_module
from support.render import RenderedChart, render_chart
from support.tls_files import write_tls_files
from support.values import module_values
from testbed.jobrunner import JobRunner
from testbed.module import ENTRY_POINT, IMAGE_ENTRYPOINT, MODULE_COMMAND, withheld_from_pods
from testbed.simulation import ClusterSimulation
from testbed.volumes import StorageClassBehaviour

NAMESPACE = "team-a"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


MATERIALIZER_IMAGE = "registry.example/ai-models/materializer@sha256:" + "0" * 64
RWX = StorageClassBehaviour(name="testbed-rwx", default=True)


@functools.cache
def rendered_chart() -> RenderedChart:
    return render_chart(module_values())


def materializer_template() -> dict[str, Any]:
    """What the chart's materializer ConfigMap gives the controller (image, command)."""
    return {
        "spec": {
            "containers": [
                {"name": MATERIALIZER_CONTAINER, "image": MATERIALIZER_IMAGE, "args": ["materialize"]}
            ]
        }
    }


@dataclasses.dataclass
class DeliveryStack:
    emulator: RunningEmulator
    store: DirectoryStore
    runtime: DeliveryRuntime
    models: dict[ModelKind, Informer]
    runner: JobRunner
    simulation: ClusterSimulation

    def get(self, path: str) -> dict[str, Any] | None:
        code, _, body = self.emulator.request("GET", path)
        if code == 404:
            return None
        assert code == 200, body
        found: dict[str, Any] = body
        return found

    def items(self, path: str) -> list[dict[str, Any]]:
        listed = self.get(path)
        assert listed is not None
        return list(listed.get("items") or [])

    def model_of(self, key: ModelKey) -> Mapping[str, Any] | None:
        return self.models[key.kind].get(key.namespace, key.name)

    def deployment(self, name: str, *, models: str, replicas: int = 2) -> dict[str, Any]:
        """A Deployment naming `models`, with the pod template the admission webhook writes at
        CREATE (`verdict.admit`: complete and gated for Ready models, gated otherwise)."""
        return self.apply_workload("Deployment", name, models=models, replicas=replicas)

    def apply_workload(self, kind: str, name: str, *, models: str, replicas: int = 2) -> dict[str, Any]:
        """A Deployment, StatefulSet or CronJob naming `models`, admitted as by the webhook."""
        template: dict[str, Any] = {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
        }
        spec: dict[str, Any]
        if kind == "CronJob":
            template["spec"]["restartPolicy"] = "Never"
            spec = {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}
        else:
            spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}
            if kind == "StatefulSet":
                spec["serviceName"] = name
        obj: dict[str, Any] = {
            "apiVersion": "batch/v1" if kind == "CronJob" else "apps/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {MODEL_ANNOTATION: models}},
            "spec": spec,
        }
        keys = [ModelKey(ModelKind.MODEL, NAMESPACE, item) for item in models.split(",")]
        admitted = self.admitted_template(obj, keys)
        if admitted is not None:
            parent = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
            parent["template"] = admitted
        return self.emulator.apply(obj)

    def admitted_template(self, obj: Mapping[str, Any], keys: list[ModelKey]) -> dict[str, Any] | None:
        """The pod template the admission webhook admits `obj` with (SharedPVC, no claim yet: the
        verdict on it as admission sees it)."""
        seen = observation(obj, models={key: self.model_of(key) for key in keys}, facts=ClaimFacts())
        return admit(seen, SharedPVC(SharedPVCSettings(api_url="").policy), now=utcnow()).template

    def workload(self, name: str, *, kind: str = "Deployment") -> dict[str, Any]:
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "CronJob": "cronjobs"}[kind]
        group = "batch/v1" if kind == "CronJob" else "apps/v1"
        found = self.get(f"/apis/{group}/namespaces/{NAMESPACE}/{plural}/{name}")
        assert found is not None
        return found

    def report(self, name: str, *, kind: str = "Deployment") -> tuple[str | None, str | None]:
        annotations = self.workload(name, kind=kind)["metadata"].get("annotations") or {}
        return annotations.get(DELIVERY_REASON_ANNOTATION), annotations.get(DELIVERY_MESSAGE_ANNOTATION)


@pytest.fixture
def start_delivery(kube_emulator: RunningEmulator, tmp_path: Path) -> Iterator[Callable[..., DeliveryStack]]:
    """`start_delivery(limit=2, template=None, identity=None, registry_credentials=None)`: the stack,
    with `limit` as delivery.maxConcurrentMaterializations, `template` instead of the materializer pod
    template, the controller as `identity` (default: the emulator's superuser) and the pull secret it
    copies beside each Job read by `registry_credentials(controller's client)` (default: none);
    everything it started is stopped when the test ends."""
    with contextlib.ExitStack() as cleanup:

        def start(
            *,
            limit: int = 2,
            template: Mapping[str, Any] | None = None,
            identity: Identity | None = None,
            registry_credentials: Callable[[Any], Callable[[], bytes | None]] | None = None,
        ) -> DeliveryStack:
            return _start(
                kube_emulator,
                tmp_path,
                cleanup,
                limit=limit,
                template=template,
                identity=identity,
                registry_credentials=registry_credentials,
            )

        yield start


def _start(
    emulator: RunningEmulator,
    tmp_path: Path,
    cleanup: contextlib.ExitStack,
    *,
    limit: int,
    template: Mapping[str, Any] | None,
    identity: Identity | None,
    registry_credentials: Callable[[Any], Callable[[], bytes | None]] | None = None,
) -> DeliveryStack:
    account = install_module(emulator, rendered=rendered_chart()).service_accounts["api"]
    emulator.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    emulator.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": NAMESPACE},
        }
    )
    store = DirectoryStore(tmp_path / "store")
    api_client = new_api_client(
        ClientOptions(retries=1, backoff_seconds=0.05), kubeconfig=str(emulator.kubeconfig(account))
    )
    cleanup.callback(api_client.close)
    index = tmp_path / "index"
    index.mkdir()
    config = ApiSettings(namespace=MODULE_NAMESPACE, api_index_dir=index, api_object_cache_seconds=0)
    api = build_runtime(config, store=store, api_client=api_client)
    cleanup.callback(api.close)
    # The api's internal TLS listener, verified with a test CA the controller copies into each Job's
    # token Secret, as in the cluster (D159).
    cert, key, ca_file = write_tls_files(tmp_path / "tls")
    server = BackgroundServer(
        api.internal_app, shutting_down=api.state.shutting_down, tls=(cert, key)
    ).start()
    cleanup.callback(server.stop)
    controller_client = emulator.api_client(identity)
    cleanup.callback(controller_client.close)
    settings = ControllerSettings()
    models = {kind: Informer(controller_client, resource) for kind, resource in MODEL_RESOURCES.items()}

    def model_of(key: ModelKey) -> Mapping[str, Any] | None:
        return models[key.kind].get(key.namespace, key.name)

    runtime = DeliveryRuntime(
        api_client=controller_client,
        model_of=model_of,
        strategy=lambda informers: SharedPVCDelivery(
            controller_client,
            informers=informers,
            settings=SharedPVCSettings(
                api_url=server.url,
                ca_file=ca_file,
                max_concurrent_materializations=limit,
                materialization_retry=datetime.timedelta(seconds=2),
            ),
            storage_class=lambda: claim_storage_class(read_inputs(controller_client, settings)),
            materializer_template=materializer_template if template is None else lambda: template,
            registry_credentials=(
                (lambda: None) if registry_credentials is None else registry_credentials(controller_client)
            ),
        ),
        events=EventRecorder(controller_client),
        resync_seconds=None,
    )
    runner = cleanup.enter_context(
        JobRunner(
            emulator,
            image_matches=lambda image: image == MATERIALIZER_IMAGE,
            commands={MODULE_COMMAND: ENTRY_POINT},
            entrypoint=IMAGE_ENTRYPOINT,
            termination_message_env=(MaterializeVariable.TERMINATION_MESSAGE_PATH.value,),
            withheld_env=withheld_from_pods,
            workdir=tmp_path / "runner",
        )
    )
    simulation = cleanup.enter_context(
        ClusterSimulation(
            emulator,
            classes=[RWX],
            runner_image=lambda image: image == MATERIALIZER_IMAGE,
            workdir=tmp_path / "volumes",
        )
    )
    manager = Manager(sync_timeout_seconds=10)
    for informer in models.values():
        informer.add_handler(runtime.model_changed)
        manager.informer(informer)
    runtime.attach(manager)
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), name="delivery-manager", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=30)

    cleanup.callback(halt)  # first out: the controller stops before what it talks to
    return DeliveryStack(
        emulator=emulator, store=store, runtime=runtime, models=models, runner=runner, simulation=simulation
    )


MODEL_RESOURCES = {ModelKind.MODEL: MODELS, ModelKind.CLUSTER_MODEL: CLUSTER_MODELS}
