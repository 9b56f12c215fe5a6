"""The controller and the api against a slow or absent API server: neither exits (a crash loop in a
pod). The controller waits at start with bounded retries and backoff, logging why, and a follower
rides out an API server restart; the api serves at once and answers what needs the API with 503
until the server is back."""

from __future__ import annotations

import datetime
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from cluster.catalog_stack import CatalogStack, stack_fixture
from fakes.hub import FakeHub
from kubeemu.pytest_fixtures import RunningEmulator
from support.api_gate import ApiGate
from support.module_install import InstalledModule, install_module
from support.processes import ModuleProcess

client: Any = typed_client
LEASE, NAMESPACE = "ai-models-controller", "d8-ai-models"


@pytest.fixture
def module(kube_emulator: RunningEmulator) -> InstalledModule:
    return install_module(kube_emulator)


@pytest.fixture
def stack(module: InstalledModule, fake_hub: FakeHub, tmp_path: Path) -> Iterator[CatalogStack]:
    yield from stack_fixture(module, fake_hub, tmp_path)


@pytest.fixture
def gate(module: InstalledModule) -> Iterator[ApiGate]:
    with ApiGate(module.emulator) as gate:
        yield gate


def start_behind(stack: CatalogStack, gate: ApiGate, replica: str = "replica-a") -> tuple[ModuleProcess, int]:
    kubeconfig = gate.kubeconfig(
        stack.module.service_accounts["controller"], stack.workdir / "gate-kubeconfig"
    )
    process = stack.controller(replica, KUBECONFIG=str(kubeconfig))
    return process, process.health_port()


def lease_holder(stack: CatalogStack) -> str | None:
    coordination = client.CoordinationV1Api(stack.emulator.api_client())
    try:
        lease = coordination.read_namespaced_lease(LEASE, NAMESPACE)
    except ApiException:
        return None
    holder: str | None = lease.spec.holder_identity
    return holder


def ready(health_port: int) -> bool:
    return status(f"http://127.0.0.1:{health_port}/readyz") == 200


def log_records(process: ModuleProcess, message: str) -> list[dict[str, Any]]:
    records = []
    for line in process.log().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("msg") == message:
            records.append(record)
    return records


def test_the_controller_waits_for_an_api_server_that_is_not_up_yet(
    stack: CatalogStack, gate: ApiGate
) -> None:
    controller, health = start_behind(stack, gate)  # the gate is closed: connections are refused
    controller.wait_for_log("Kubernetes API not reachable yet, retrying", timeout=30)
    [first] = log_records(controller, "Kubernetes API not reachable yet, retrying")[:1]
    assert first["attempt"] == 1
    assert first["retry_in_seconds"] > 0
    assert not ready(health)
    gate.open()
    stack.eventually(lambda: lease_holder(stack) == "replica-a", what="leadership once the API is up")
    stack.eventually(lambda: ready(health), what="readiness")
    assert controller.running()


def test_the_controller_retries_an_api_server_that_stalls_at_start(
    stack: CatalogStack, gate: ApiGate
) -> None:
    """Connections are accepted but never answered: every call has a timeout, so the start is
    retried instead of waiting forever."""
    gate.stall()
    controller, health = start_behind(stack, gate)
    controller.wait_for_log("Kubernetes API not reachable yet, retrying", timeout=60)
    gate.open()
    stack.eventually(lambda: ready(health), timeout=60, what="readiness once the API answers")
    stack.eventually(lambda: lease_holder(stack) == "replica-a", what="leadership")
    assert controller.running()


def test_a_follower_rides_out_an_api_server_that_goes_away(stack: CatalogStack, gate: ApiGate) -> None:
    coordination = client.CoordinationV1Api(stack.emulator.api_client())
    now = datetime.datetime.now(datetime.UTC)
    coordination.create_namespaced_lease(
        NAMESPACE,
        {
            "metadata": {"name": LEASE},
            "spec": {
                "holderIdentity": "replica-elsewhere",
                "leaseDurationSeconds": 3600,
                "acquireTime": now.isoformat(),
                "renewTime": now.isoformat(),
            },
        },
    )
    gate.open()
    controller, health = start_behind(stack, gate)
    controller.wait_for_log("waiting for the lease", timeout=30)
    stack.eventually(lambda: ready(health), what="follower readiness")

    gate.close()  # the API server restarts: the follower's Lease reads fail for a while
    controller.wait_for_log("cannot reach the Kubernetes API for the Lease; retrying", timeout=30)
    gate.stall()  # then it accepts connections but does not answer yet
    connections = gate.accepted
    stack.eventually(lambda: gate.accepted > connections + 1, what="Lease reads retried on a stalled server")
    assert controller.running()

    gate.open()
    coordination.delete_namespaced_lease(LEASE, NAMESPACE)  # the other replica is gone
    stack.eventually(lambda: lease_holder(stack) == "replica-a", what="leadership after the outage")
    controller.wait_for_log("the Kubernetes API answers the Lease again", timeout=30)
    assert controller.running()
    assert ready(health)


def test_the_api_serves_without_an_api_server_and_answers_once_it_is_up(
    stack: CatalogStack, gate: ApiGate
) -> None:
    api = ModuleProcess(
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        env={
            "KUBECONFIG": str(
                gate.kubeconfig(stack.module.service_accounts["api"], stack.workdir / "api-kubeconfig")
            ),
            "AI_MODELS_STORE_URL": f"file://{stack.store_dir}",
            "AI_MODELS_NAMESPACE": NAMESPACE,
            "AI_MODELS_POD_NAME": "api-0",
            "AI_MODELS_API_METRICS_PORT": "0",
            "AI_MODELS_API_INDEX_DIR": str(stack.workdir / "api-index"),
        },
        log_path=stack.workdir / "api.log",
    ).start()
    stack.processes.append(api)
    base = f"http://127.0.0.1:{api.api_port()}"
    api.wait_until(
        lambda: status(f"{base}/readyz") == 200, timeout=30, what="api readiness without an API server"
    )

    search = f"{base}/api/catalog-import/v1/models?q=qwen"
    token = stack.emulator.superuser.token
    assert status(search, token) == 503  # the token cannot be reviewed yet: retry later
    gate.open()
    api.wait_until(lambda: status(search, token) == 200, timeout=30, what="a search once the API is up")
    assert api.running()


def status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return 0
