"""`make dev` restarted: the cluster's objects come back from `.dev/` with the artifacts they name,
the controller's inventory pass then removes nothing, and `AI_MODELS_DEV_FRESH=1` starts empty."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fakes.hub import FakeHub
from fakes.hub_corpus import repository
from fakes.model_files import safetensors_bytes
from support.eventually import eventually
from testbed.devstack import STATE_FILE
from testbed.test_devstack import env_of, run_devstack, run_kubectl

INVENTORY_DONE = "inventory pass confirmed the ledger"


@contextmanager
def dev_stack(tmp_path: Path, fake_hub: FakeHub, **env: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """One run of the stack in `tmp_path/dev`, stopped with SIGTERM at the end (exit 0)."""
    # The stack removes the last run's env file as it starts; removed here first, the file's
    # appearance means this run is ready.
    (tmp_path / "dev" / "env").unlink(missing_ok=True)
    runs = run_devstack(tmp_path, fake_hub, **env)
    process, out = next(runs)
    try:
        yield process, out
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        next(runs, None)  # its cleanup: kill the process if it still runs


def model(out: Path, name: str) -> dict[str, Any]:
    shown = run_kubectl(out, "get", "model", name, "-n", "default", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def artifact_files(out: Path) -> list[str]:
    root = out / "store" / "artifacts"
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def inventory_passes(out: Path) -> list[str]:
    log = (out / "logs" / "controller.log").read_text(errors="replace")
    return [line for line in log.splitlines() if INVENTORY_DONE in line]


def test_a_restart_keeps_objects_and_artifacts_and_fresh_starts_empty(
    tmp_path: Path, fake_hub: FakeHub
) -> None:
    fake_hub.add(
        repository(
            "acme/tiny",
            {
                "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
                "model.safetensors": safetensors_bytes({"w": ("F16", (32, 32))}),
            },
        )
    )
    manifest = (
        "apiVersion: ai.deckhouse.io/v1alpha1\nkind: Model\nmetadata: {name: tiny, namespace: default}\n"
    )
    manifest += 'spec: {source: {url: "https://huggingface.co/acme/tiny"}}\n'
    with dev_stack(tmp_path, fake_hub) as (_, out):
        assert run_kubectl(out, "apply", "-f", "-", stdin=manifest).returncode == 0
        waited = run_kubectl(
            out, "wait", "-n", "default", "--for=condition=Ready", "model/tiny", "--timeout=60s"
        )
        assert waited.returncode == 0, waited.stderr
        before = model(out, "tiny")
        stored = artifact_files(out)
        assert any(name.endswith("model.safetensors") for name in stored), stored
        eventually(lambda: inventory_passes(out), timeout=30, message="the first run's inventory pass")
        tokens = {k: v for k, v in env_of(out).items() if k.startswith("AI_MODELS_TOKEN_")}
        assert len(tokens) == 3
    assert (out / STATE_FILE).is_file()

    # A restart is a restart: the same object (uid, status), its artifact kept by the inventory.
    with dev_stack(tmp_path, fake_hub) as (_, out):
        after = model(out, "tiny")
        # A shell that sourced the env file before the restart goes on working.
        assert {k: v for k, v in env_of(out).items() if k.startswith("AI_MODELS_TOKEN_")} == tokens
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["status"]["phase"] == "Ready"
        assert after["status"]["artifact"] == before["status"]["artifact"]
        assert int(after["metadata"]["resourceVersion"]) >= int(before["metadata"]["resourceVersion"])
        eventually(
            lambda: len(inventory_passes(out)) >= 2,
            timeout=60,
            message=lambda: (
                "the restarted controller's inventory pass:\n"
                + (out / "logs" / "controller.log").read_text()[-3000:]
            ),
        )
        assert "removed=0" in inventory_passes(out)[-1], inventory_passes(out)[-1]
        assert artifact_files(out) == stored
        # resourceVersions continue after the saved ones.
        annotated = run_kubectl(
            out, "annotate", "model", "tiny", "-n", "default", "restarted=yes", "-o", "json"
        )
        assert annotated.returncode == 0, annotated.stderr
        written = int(json.loads(annotated.stdout)["metadata"]["resourceVersion"])
        assert written > int(after["metadata"]["resourceVersion"])

    # `make dev FRESH=1`: an empty cluster and an empty store.
    with dev_stack(tmp_path, fake_hub, AI_MODELS_DEV_FRESH="1") as (_, out):
        gone = run_kubectl(out, "get", "models", "-A", "-o", "name")
        assert gone.returncode == 0, gone.stderr
        assert gone.stdout.strip() == ""
        assert env_of(out)["AI_MODELS_TOKEN_USER"] != tokens["AI_MODELS_TOKEN_USER"]
        assert artifact_files(out) == []
