"""Built-in semantics the Job runner relies on: Secret `stringData` folded into `data`, and the
Table columns `kubectl get jobs,pods` prints (computed like kubectl's printers, not JSONPath)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubeemu.pytest_fixtures import RunningEmulator

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
IMAGE = "registry.example/app@sha256:" + "0" * 64


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_secret_string_data_is_written_into_data_and_never_stored(emulator: RunningEmulator) -> None:
    path = "/api/v1/namespaces/default/secrets"
    code, _, created = emulator.request(
        "POST",
        path,
        body={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s"},
            "data": {"kept": b64("old"), "replaced": b64("old")},
            "stringData": {"replaced": "new", "added": "plain"},
        },
    )
    assert code == 201
    assert created["data"] == {"kept": b64("old"), "replaced": b64("new"), "added": b64("plain")}
    assert "stringData" not in created

    code, _, patched = emulator.request(
        "PATCH",
        f"{path}/s",
        body={"stringData": {"kept": "changed"}},
        content_type="application/merge-patch+json",
    )
    assert code == 200
    assert patched["data"]["kept"] == b64("changed")
    _, _, read = emulator.request("GET", f"{path}/s")
    assert "stringData" not in read
    assert read["data"]["kept"] == b64("changed")


def table(emulator: RunningEmulator, path: str) -> dict[str, list[Any]]:
    code, _, body = emulator.request("GET", path, headers={"Accept": TABLE})
    assert code == 200, body
    return {row["cells"][0]: row["cells"][1:] for row in body["rows"]} | {
        "": [c["name"] for c in body["columnDefinitions"]][1:]
    }


def pod(name: str, *, containers: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": f"c{n}", "image": IMAGE} for n in range(containers)]},
    }


def container(state: dict[str, Any], *, ready: bool = False, restarts: int = 0) -> dict[str, Any]:
    return {"name": "c0", "image": IMAGE, "ready": ready, "restartCount": restarts, "state": state}


@pytest.mark.parametrize(
    ("status", "cells"),
    [
        ({"phase": "Pending"}, ["0/1", "Pending", "0"]),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    container({"waiting": {"reason": "CreateContainerConfigError", "message": "x"}})
                ],
            },
            ["0/1", "CreateContainerConfigError", "0"],
        ),
        (
            {"phase": "Running", "containerStatuses": [container({"running": {}}, ready=True, restarts=2)]},
            ["1/1", "Running", "2"],
        ),
        (
            {
                "phase": "Succeeded",
                "containerStatuses": [container({"terminated": {"exitCode": 0, "reason": "Completed"}})],
            },
            ["0/1", "Completed", "0"],
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [container({"terminated": {"exitCode": 137, "reason": "Error"}})],
            },
            ["0/1", "Error", "0"],
        ),
        (
            {"phase": "Failed", "containerStatuses": [container({"terminated": {"exitCode": 3}})]},
            ["0/1", "ExitCode:3", "0"],
        ),
        ({"phase": "Failed", "reason": "Evicted"}, ["0/1", "Evicted", "0"]),
    ],
)
def test_pod_table_has_kubectls_ready_status_and_restarts(
    emulator: RunningEmulator, status: dict[str, Any], cells: list[str]
) -> None:
    pods = emulator.cluster.resource("", "v1", "pods")
    assert pods is not None
    emulator.cluster.create(pods, pod("p"), namespace="default")
    code, _, _ = emulator.request(
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )
    assert code == 200
    printed = table(emulator, "/api/v1/namespaces/default/pods")
    assert printed[""] == ["Ready", "Status", "Restarts", "Age"]
    assert printed["p"][:3] == cells


def test_a_deleted_running_pod_prints_terminating(emulator: RunningEmulator) -> None:
    pods = emulator.cluster.resource("", "v1", "pods")
    assert pods is not None
    held = pod("held", containers=2)
    held["metadata"]["finalizers"] = ["example.test/hold"]
    emulator.cluster.create(pods, held, namespace="default")
    emulator.request(
        "PATCH",
        "/api/v1/namespaces/default/pods/held/status",
        body={"status": {"phase": "Running", "containerStatuses": [container({"running": {}}, ready=True)]}},
        content_type="application/merge-patch+json",
    )
    emulator.request("DELETE", "/api/v1/namespaces/default/pods/held")
    assert table(emulator, "/api/v1/namespaces/default/pods")["held"][:2] == ["1/2", "Terminating"]


def job(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE}]}},
            **spec,
        },
    }


def true(*kinds: str) -> list[dict[str, str]]:
    return [{"type": kind, "status": "True"} for kind in kinds]


@pytest.mark.parametrize(
    ("spec", "status", "cells"),
    [
        ({}, {}, ["Running", "0/1", None]),
        ({"completions": 3}, {"succeeded": 1}, ["Running", "1/3", None]),
        ({"parallelism": 2}, {}, ["Running", "0/1 of 2", None]),
        (
            {},
            {
                "succeeded": 1,
                "startTime": "2025-01-01T10:00:00Z",
                "completionTime": "2025-01-01T10:01:30Z",
                "conditions": true("SuccessCriteriaMet", "Complete"),
            },
            ["Complete", "1/1", "90s"],
        ),
        ({}, {"failed": 2, "conditions": true("FailureTarget", "Failed")}, ["Failed", "0/1", None]),
        ({}, {"conditions": true("FailureTarget")}, ["FailureTarget", "0/1", None]),
        ({}, {"conditions": true("SuccessCriteriaMet")}, ["SuccessCriteriaMet", "0/1", None]),
        ({}, {"conditions": [{"type": "Failed", "status": "False"}]}, ["Running", "0/1", None]),
    ],
)
def test_job_table_has_kubectls_status_completions_and_duration(
    emulator: RunningEmulator, spec: dict[str, Any], status: dict[str, Any], cells: list[Any]
) -> None:
    jobs = emulator.cluster.resource("batch", "v1", "jobs")
    assert jobs is not None
    emulator.cluster.create(jobs, job("j", **spec), namespace="default")
    if status:
        code, _, _ = emulator.request(
            "PATCH",
            "/apis/batch/v1/namespaces/default/jobs/j/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )
        assert code == 200
    printed = table(emulator, "/apis/batch/v1/namespaces/default/jobs")
    assert printed[""] == ["Status", "Completions", "Duration", "Age"]
    assert [c or None for c in printed["j"][:3]] == cells


def test_a_running_job_prints_its_duration_so_far(emulator: RunningEmulator) -> None:
    jobs = emulator.cluster.resource("batch", "v1", "jobs")
    assert jobs is not None
    emulator.cluster.create(jobs, job("j"), namespace="default")
    emulator.request(
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/j/status",
        body={"status": {"startTime": "2000-01-01T00:00:00Z", "active": 1}},
        content_type="application/merge-patch+json",
    )
    assert table(emulator, "/apis/batch/v1/namespaces/default/jobs")["j"][2].endswith("y")
