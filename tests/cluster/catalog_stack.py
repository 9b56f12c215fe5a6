"""A catalog stack for cluster tests: emulator + module RBAC + fake Hub + directory store + controller."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client

from ai_models.names import CATALOG_SYNC_REQUESTED_AT_ANNOTATION
from fakes.hub import FakeHub
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually
from support.module_install import InstalledModule, install_module
from support.processes import ModuleProcess

client: Any = typed_client
GROUP, VERSION, PLURAL = "ai.deckhouse.io", "v1alpha1", "modelcatalogsources"


def sync_request() -> dict[str, str]:
    """The annotation that asks a source for a pass now: a timestamp after its last pass start.

    The controller honours a request newer than the last pass start, to the second; a second ahead
    keeps a pass that started this very second from hiding the request.
    """
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    return {CATALOG_SYNC_REQUESTED_AT_ANNOTATION: at.strftime("%Y-%m-%dT%H:%M:%SZ")}


@dataclasses.dataclass
class CatalogStack:
    module: InstalledModule
    hub: FakeHub
    store_dir: Path
    workdir: Path
    processes: list[ModuleProcess] = dataclasses.field(default_factory=list)

    @property
    def emulator(self) -> RunningEmulator:
        return self.module.emulator

    @property
    def objects(self) -> Any:
        return client.CustomObjectsApi(self.emulator.api_client())

    def controller(self, replica: str = "controller-0", **env: str) -> ModuleProcess:
        process = ModuleProcess(
            "controller",
            env={
                "KUBECONFIG": str(self.module.kubeconfig("controller")),
                "AI_MODELS_STORE_URL": f"file://{self.store_dir}",
                "AI_MODELS_HF_ENDPOINT": self.hub.url,
                "AI_MODELS_NAMESPACE": "d8-ai-models",
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
                "AI_MODELS_CATALOG_RETRY_BASE_SECONDS": "0.5",
                "AI_MODELS_CATALOG_RETRY_CAP_SECONDS": "2",
                **env,
            },
            log_path=self.workdir / f"{replica}.log",
        ).start()
        self.processes.append(process)
        return process

    def create_source(self, name: str, *, opted_in: bool, spec: dict[str, Any] | None = None) -> None:
        annotations = {"ai.deckhouse.io/catalog-sync": "Enabled"} if opted_in else {}
        self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ModelCatalogSource",
                "metadata": {"name": name, "annotations": annotations},
                "spec": spec or {"provider": "HuggingFace", "huggingFace": {}, "chunkSize": 50},
            },
        )

    def request_sync(self, name: str) -> None:
        """Ask for a pass of source `name` now (the request annotation, see `sync_request`)."""
        self.annotate(name, sync_request())

    def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self.objects.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, name, {"metadata": {"annotations": annotations}}
        )

    def source(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        return found

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        for item in self.source(name).get("status", {}).get("conditions", []):
            if item["type"] == type_:
                return dict(item)
        return {}

    def manifest(self, source: str) -> dict[str, Any] | None:
        path = self.store_dir / "catalog" / source / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else None

    def served_ids(self, source: str) -> list[str]:
        manifest = self.manifest(source)
        assert manifest is not None
        ids: list[str] = []
        for chunk in manifest["chunks"]:
            chunk_path = self.store_dir / "catalog" / source / "generations" / manifest["generation"] / chunk
            ids.extend(json.loads(line)["id"] for line in chunk_path.read_text().splitlines() if line)
        return ids

    def events(self, reason: str) -> list[Any]:
        listed = client.CoreV1Api(self.emulator.api_client()).list_event_for_all_namespaces()
        return [event for event in listed.items if event.reason == reason]

    def eventually(self, check: Callable[[], bool], *, timeout: float = 30, what: str) -> None:
        """`eventually`, with the processes' last log lines in the failure message."""

        def described() -> str:
            logs = "\n".join(
                f"--- {process.name} ({process.log_path.name})\n{process.log()[-3000:]}"
                for process in self.processes
            )
            return f"{what}\n{logs}"

        eventually(check, timeout=timeout, message=described)

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()


def stack_fixture(module: InstalledModule, hub: FakeHub, tmp_path: Path) -> Iterator[CatalogStack]:
    stack = CatalogStack(module=module, hub=hub, store_dir=tmp_path / "store", workdir=tmp_path)
    stack.store_dir.mkdir()
    try:
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture(name="stack")
def catalog_stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, tmp_path: Path
) -> Iterator[CatalogStack]:
    """The `stack` of a catalog test: the module installed into a fresh emulator, the fake Hub (its
    models from the test file's `fake_hub_corpus`), a directory store; every process stopped after."""
    yield from stack_fixture(install_module(kube_emulator), fake_hub, tmp_path)
