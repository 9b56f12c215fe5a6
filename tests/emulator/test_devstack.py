"""`make dev`: the local stack as a real process, used through kubectl with its three identities."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubeemu.pytest_fixtures import KUBECTL

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def devstack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    out = tmp_path / "dev"
    env = {
        **os.environ,
        "AI_MODELS_DEV_PORT": "0",
        "AI_MODELS_DEV_CONTROLLER_HEALTH_PORT": "0",
        "AI_MODELS_DEV_CONTROLLER_METRICS_PORT": "0",
        "AI_MODELS_DEV_DIR": str(out),
        "PYTHONPATH": str(REPO / "tests"),
    }
    env.pop("KUBECONFIG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "kubeemu.devstack"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "env").exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "dev stack did not come up"
            time.sleep(0.1)
        yield process, out
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def run_kubectl(
    out: Path, *args: str, context: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [
        str(KUBECTL),
        "--kubeconfig",
        str(out / "kubeconfig"),
        "--cache-dir",
        str(out / "cache"),
        *args,
    ]
    if context:
        command += ["--context", context]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30, check=False)


def test_dev_stack_serves_the_module_api_to_its_three_identities(
    devstack: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = devstack
    env_lines = (out / "env").read_text().splitlines()
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in env_lines if line.startswith("export")
    )
    assert {
        "KUBECONFIG",
        "AI_MODELS_DEV_SERVER",
        "AI_MODELS_TOKEN_CLUSTER_ADMIN",
        "AI_MODELS_TOKEN_USER",
        "AI_MODELS_TOKEN_NAMESPACE_USER",
    } <= set(exported)
    assert exported["PATH"] == f"{KUBECTL.parent}:$PATH"
    kubeconfig = yaml.safe_load((out / "kubeconfig").read_text())
    assert kubeconfig["current-context"] == "cluster-admin"
    assert [c["name"] for c in kubeconfig["contexts"]] == ["cluster-admin", "user", "namespace-user"]

    example = (REPO / "docs" / "examples" / "model-hf.yaml").read_text()
    name = yaml.safe_load(example)["metadata"]["name"]
    applied = run_kubectl(out, "apply", "-f", "-", stdin=example)
    assert applied.returncode == 0, applied.stderr
    assert run_kubectl(out, "get", "models", "-n", "default", "-o", "name").stdout.split() == [
        f"model.ai.deckhouse.io/{name}"
    ]
    invalid = yaml.safe_load(example)
    invalid["metadata"]["name"] = "invalid"
    invalid["spec"]["source"]["upload"] = {}
    rejected = run_kubectl(out, "apply", "-f", "-", stdin=yaml.safe_dump(invalid))
    assert rejected.returncode == 1
    # The exact line docs/USER_GUIDE.md shows a user.
    assert (
        'The Model "invalid" is invalid: spec.source: Invalid value: "object": '
        "exactly one of url, upload or catalog must be set" in rejected.stderr
    )
    changed = run_kubectl(
        out,
        "patch",
        "model",
        name,
        "-n",
        "default",
        "--type",
        "merge",
        "-p",
        '{"spec": {"source": {"url": "https://huggingface.co/org/other"}}}',
    )
    assert changed.returncode == 1
    assert 'spec.source: Invalid value: "object": spec.source is immutable' in changed.stderr

    def can_i(context: str, *args: str) -> str:
        return run_kubectl(out, "auth", "can-i", *args, context=context).stdout.strip()

    assert can_i("cluster-admin", "create", "clustermodels") == "yes"
    assert can_i("cluster-admin", "create", "namespaces") == "yes"
    assert can_i("user", "list", "clustermodels") == "yes"
    assert can_i("user", "create", "models", "-n", "default") == "no"
    assert can_i("namespace-user", "list", "models", "-n", "default") == "yes"
    assert can_i("namespace-user", "list", "models", "-n", "kube-system") == "no"
    assert can_i("namespace-user", "list", "clustermodels", "--all-namespaces") == "no"
    forbidden = run_kubectl(out, "get", "clustermodels", context="namespace-user")
    assert 'User "dev-namespace-user" cannot list resource "clustermodels"' in forbidden.stderr

    # The controller runs as its ServiceAccount: it reports on a source that has not opted in.
    source = (REPO / "docs" / "examples" / "modelcatalogsource-hf.yaml").read_text()
    quiet = yaml.safe_load(source)
    del quiet["metadata"]["annotations"]
    assert run_kubectl(out, "apply", "-f", "-", stdin=yaml.safe_dump(quiet)).returncode == 0
    deadline = time.monotonic() + 30
    reason = ""
    while reason != "WaitingForOptIn" and time.monotonic() < deadline:
        time.sleep(0.2)
        reason = run_kubectl(
            out,
            "get",
            "modelcatalogsource",
            "huggingface",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].reason}",
        ).stdout
    assert reason == "WaitingForOptIn", (out / "logs" / "controller.log").read_text()[-3000:]

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert (out / "kubeconfig").exists()
    assert "stopped with exit code 0" in process.communicate(timeout=10)[1]
