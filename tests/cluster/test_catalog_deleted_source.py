"""A ModelCatalogSource deleted while no controller ran: the next inventory pass stops every api replica
serving it, and a later one, after the grace period, removes its index from the store."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from cluster.catalog_stack import GROUP, PLURAL, VERSION, CatalogStack, stack_fixture
from fakes.hub import FakeHub, FakeModel
from fakes.hub_corpus import make_corpus
from kubeemu.pytest_fixtures import RunningEmulator
from support.module_install import install_module
from support.processes import ModuleProcess

client: Any = typed_client
NAMESPACE, LEDGER = "d8-ai-models", "ai-models-storage-accounting"
# Passes every half second, and a grace period no test waits for: the absence is backdated instead.
INVENTORY = {
    "AI_MODELS_INVENTORY_INTERVAL_SECONDS": "0.5",
    "AI_MODELS_INVENTORY_ORPHAN_GRACE_SECONDS": "3600",
}


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(12, seed=3)


@pytest.fixture
def stack(kube_emulator: RunningEmulator, fake_hub: FakeHub, tmp_path: Path) -> Iterator[CatalogStack]:
    yield from stack_fixture(install_module(kube_emulator), fake_hub, tmp_path)


def start_api(stack: CatalogStack) -> str:
    api = ModuleProcess(
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        env={
            "KUBECONFIG": str(stack.module.kubeconfig("api")),
            "AI_MODELS_STORE_URL": f"file://{stack.store_dir}",
            "AI_MODELS_NAMESPACE": NAMESPACE,
            "AI_MODELS_POD_NAME": "api-0",
            "AI_MODELS_API_METRICS_PORT": "0",
            "AI_MODELS_API_INDEX_DIR": str(stack.workdir / "api-index"),
            "AI_MODELS_API_INDEX_REFRESH_SECONDS": "0.5",
        },
        log_path=stack.workdir / "api.log",
    ).start()
    stack.processes.append(api)
    return f"http://127.0.0.1:{api.api_port()}/api/catalog-import/v1"


def get(stack: CatalogStack, url: str) -> dict[str, Any]:
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {stack.emulator.superuser.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def served_sources(stack: CatalogStack, base: str) -> list[str]:
    return [item["name"] for item in get(stack, f"{base}/sources")["items"]]


def found_in(stack: CatalogStack, base: str, source: str) -> int:
    return len(get(stack, f"{base}/models?source={source}&pageSize=100")["items"])


def stored(stack: CatalogStack, source: str) -> list[str]:
    root = stack.store_dir / "catalog" / source
    return (
        sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
        if root.exists()
        else []
    )


def delete_behind_the_controllers_back(stack: CatalogStack, name: str) -> None:
    """What an admin does with the module's controller down: delete, then drop the finalizer."""
    stack.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    stack.objects.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as gone:
        stack.source(name)
    assert gone.value.status == 404


def backdate_absences(stack: CatalogStack) -> None:
    """The grace period passing, as the next controller sees it (no controller runs meanwhile)."""
    core = client.CoreV1Api(stack.emulator.api_client())
    secret = core.read_namespaced_secret(LEDGER, NAMESPACE)
    ledger = json.loads(base64.b64decode(secret.data["ledger.json"]))
    assert [item["prefix"] for item in ledger["absences"]] == ["catalog/gone/"]
    for item in ledger["absences"]:
        item["since"] = "2026-01-01T00:00:00Z"
    secret.data["ledger.json"] = base64.b64encode(json.dumps(ledger).encode()).decode()
    core.replace_namespaced_secret(LEDGER, NAMESPACE, secret)


def test_a_source_deleted_while_the_controller_was_down_leaves_search_and_then_the_store(
    stack: CatalogStack,
) -> None:
    first = stack.controller("controller-0", **INVENTORY)
    for name in ("kept", "gone"):
        stack.create_source(name, opted_in=True)
    stack.eventually(
        lambda: all(stack.manifest(name) is not None for name in ("kept", "gone")), what="both sources served"
    )
    kept = stack.manifest("kept")
    base = start_api(stack)
    stack.eventually(lambda: served_sources(stack, base) == ["gone", "kept"], what="both sources searchable")
    indexed = len([model for model in stack.hub.models if not model.gated])
    assert found_in(stack, base, "gone") == indexed
    first.kill()

    delete_behind_the_controllers_back(stack, "gone")
    chunks = [key for key in stored(stack, "gone") if key.startswith("generations/")]
    assert chunks
    assert served_sources(stack, base) == ["gone", "kept"]  # nothing else would ever drop it

    second = stack.controller("controller-1", **INVENTORY)
    stack.eventually(lambda: served_sources(stack, base) == ["kept"], what="the deleted source withdrawn")
    # A withdrawn source is no source: searching it is refused like an unknown parameter (D146).
    with pytest.raises(urllib.error.HTTPError) as withdrawn:
        found_in(stack, base, "gone")
    assert withdrawn.value.code == 400
    assert found_in(stack, base, "kept") == indexed
    second.wait_for_log("catalog index of a deleted ModelCatalogSource waits for the grace period")
    stack.eventually(
        lambda: second.log().count("catalog index of a deleted ModelCatalogSource waits") >= 3,
        what="more inventory passes",
    )
    # Withdrawn, not removed: within the grace period the source could still come back.
    assert stored(stack, "gone") == sorted([*chunks, "withdrawn-manifest.json"])
    second.kill()

    backdate_absences(stack)
    third = stack.controller("controller-2", **INVENTORY)
    stack.eventually(lambda: stored(stack, "gone") == [], what="the deleted source's index removed")
    assert "inventory pass removed the catalog index of a deleted ModelCatalogSource" in third.log()
    assert stack.manifest("kept") == kept
    assert served_sources(stack, base) == ["kept"]
    assert found_in(stack, base, "kept") == indexed
