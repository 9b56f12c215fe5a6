"""What keeps a long-running emulator (`make dev`) fast and small: bounded logs, bounded snapshots,
watchers that go away with their clients, and field validation modes."""

from __future__ import annotations

from pathlib import Path

from kubeemu.crds import load_crd_manifests
from kubeemu.pytest_fixtures import EmulatorFactory, RunningEmulator
from support.eventually import eventually

FIXTURES = Path(__file__).parent / "fixtures"


def test_crd_loader_skips_documentation_twins() -> None:
    names = [c["metadata"]["name"] for c in load_crd_manifests(FIXTURES)]
    assert names == ["gadgets.example.test", "widgets.example.test"]


def test_event_log_is_a_bounded_ring(kube_emulator_factory: EmulatorFactory) -> None:
    emulator = kube_emulator_factory(event_log_size=5)
    for i in range(40):
        emulator.cluster.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}}
        )
    assert len(emulator.cluster.store._log["/configmaps"]) == 5


def test_paginated_list_snapshots_are_bounded(emulator: RunningEmulator) -> None:
    for i in range(3):
        emulator.cluster.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}}
        )
    for _ in range(100):
        status, _, body = emulator.request("GET", "/api/v1/namespaces/default/configmaps?limit=1")
        assert status == 200
        assert body["metadata"]["continue"]
    assert len(emulator.cluster._snapshots) <= 64


def test_a_disconnected_watch_unsubscribes(emulator: RunningEmulator) -> None:
    connection = emulator.connection()
    connection.request(
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1",
        headers={"Authorization": f"Bearer {emulator.superuser.token}"},
    )
    response = connection.getresponse()
    assert response.status == 200
    eventually(
        lambda: list(emulator.cluster.store.subscribers("/configmaps")),
        timeout=5,
        interval=0.05,
        message="the watch to subscribe",
    )
    connection.close()
    eventually(
        lambda: not list(emulator.cluster.store.subscribers("/configmaps")),
        timeout=5,
        interval=0.05,
        message="the subscription to end with its client (it outlived it)",
    )


def test_field_validation_modes(emulator: RunningEmulator) -> None:
    body = (
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"bogus":1,"data":{},"data":{"a":"b"}}'
    )
    path = "/api/v1/namespaces/default/configmaps"
    status, _, answer = emulator.request("POST", f"{path}?fieldValidation=Strict", body=body % "strict")
    assert (status, answer["message"]) == (
        400,
        'strict decoding error: unknown field "bogus", duplicate field "data"',
    )
    status, headers, answer = emulator.request("POST", path, body=body % "warn")
    assert status == 201
    assert headers.get_all("Warning") == [
        '299 - "unknown field \\"bogus\\""',
        '299 - "duplicate field \\"data\\""',
    ]
    assert answer["data"] == {"a": "b"}
    status, headers, _ = emulator.request("POST", f"{path}?fieldValidation=Ignore", body=body % "ignore")
    assert status == 201
    assert headers.get_all("Warning") is None
