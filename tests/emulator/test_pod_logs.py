"""`kubectl logs` against the emulator: `pods/{name}/log` served from the files a `PodLogSource`
names (the test bed's Job runner captures its Pods' output there), and a Job's generated selector,
through which `kubectl logs job/<name>` finds the Job's Pod."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeemu.cluster import Cluster
from kubeemu.pytest_fixtures import RunningEmulator
from kubeemu.server import EmulatorServer

LOG = "starting\nfetching config.json\ndone\n"


@pytest.fixture
def emulator_with_logs(tmp_path: Path) -> Iterator[RunningEmulator]:
    logs = tmp_path / "logs"

    def source(namespace: str, pod: str, container: str) -> Path | None:
        path = logs / namespace / pod / container
        return path if path.is_file() else None

    running = RunningEmulator(
        server=EmulatorServer(Cluster(), pod_logs=source).start(), workdir=tmp_path / "emulator"
    )
    running.workdir.mkdir()
    (logs / "default").mkdir(parents=True)
    try:
        yield running
    finally:
        running.close()


def pod(name: str, *containers: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]},
    }


def write_log(emulator: RunningEmulator, pod_name: str, container: str, text: str) -> None:
    directory = emulator.workdir.parent / "logs" / "default" / pod_name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / container).write_text(text)


def test_kubectl_logs_prints_a_pods_log_its_tail_and_refuses_an_unknown_container(
    emulator_with_logs: RunningEmulator,
) -> None:
    emulator = emulator_with_logs
    emulator.apply(pod("worker", "main"))
    emulator.apply(pod("pair", "a", "b"))
    write_log(emulator, "worker", "main", LOG)
    write_log(emulator, "pair", "b", "from b\n")

    assert emulator.kubectl("logs", "-n", "default", "worker").stdout == LOG
    assert emulator.kubectl("logs", "-n", "default", "worker", "--tail=1").stdout == "done\n"
    assert emulator.kubectl("logs", "-n", "default", "pair", "-c", "b").stdout == "from b\n"
    wrong = emulator.kubectl("logs", "-n", "default", "worker", "-c", "other", check=False)
    assert wrong.returncode == 1
    assert "container other is not valid for pod worker" in wrong.stderr
    # A Pod nobody runs has no log: the answer says so instead of "could not find the resource".
    emulator.apply(pod("idle", "main"))
    idle = emulator.kubectl("logs", "-n", "default", "idle", check=False)
    assert idle.returncode == 1
    assert 'container "main" in pod "idle" is waiting to start' in idle.stderr


def test_a_job_gets_its_generated_selector_and_kubectl_logs_finds_its_pod(
    emulator_with_logs: RunningEmulator,
) -> None:
    emulator = emulator_with_logs
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "publish", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "publish", "image": "busybox"}]}
            }
        },
    }
    emulator.apply(job)
    created = json.loads(emulator.kubectl("get", "job", "publish", "-n", "default", "-o", "json").stdout)
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert created["spec"]["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "publish",
        "controller-uid": uid,
        "job-name": "publish",
    }
    # The Pod the Job controller would create, with the labels it gives its Pods.
    emulator.apply(pod("publish-x7k2p", "publish", labels={"batch.kubernetes.io/controller-uid": uid}))
    write_log(emulator, "publish-x7k2p", "publish", LOG)
    assert emulator.kubectl("logs", "-n", "default", "job/publish", "-c", "publish").stdout == LOG
