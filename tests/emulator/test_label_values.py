"""Label values and generated names as the apiserver checks them: a Job whose name or pod template
labels do not fit a label value is refused with 422, and a long generateName is shortened."""

from __future__ import annotations

from typing import Any

from kubeemu.pytest_fixtures import RunningEmulator

IMAGE = "registry.example/app@sha256:" + "0" * 64


def job(name: str, *, template_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": template_labels or {}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE}]},
            }
        },
    }


def causes(answer: dict[str, Any]) -> set[str]:
    return {item["field"] for item in answer["details"]["causes"]}


def test_a_job_name_longer_than_a_label_value_is_refused(emulator: RunningEmulator) -> None:
    path = "/apis/batch/v1/namespaces/default/jobs"
    code, _, answer = emulator.request("POST", path, body=job("j" * 64))
    assert code == 422
    assert answer["reason"] == "Invalid"
    assert causes(answer) == {"spec.template.labels"}

    code, _, _ = emulator.request("POST", path, body=job("j" * 63))
    assert code == 201


def test_pod_template_label_values_are_validated(emulator: RunningEmulator) -> None:
    path = "/apis/batch/v1/namespaces/default/jobs"
    code, _, answer = emulator.request("POST", path, body=job("ok", template_labels={"owner": "x" * 64}))
    assert code == 422
    assert causes(answer) == {"spec.template.labels"}
    code, _, answer = emulator.request(
        "POST", path, body=job("ok", template_labels={"owner": "ends-with-dash-"})
    )
    assert code == 422


def test_a_long_generate_name_is_cut_to_58_characters(emulator: RunningEmulator) -> None:
    prefix = "e" * 252 + "."
    code, _, created = emulator.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": prefix}},
    )
    assert code == 201
    assert created["metadata"]["name"].startswith("e" * 58)
    assert len(created["metadata"]["name"]) == 63
