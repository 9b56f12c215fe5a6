"""The controller's first API calls against an API server that is absent, stalled or gone for a
while: bounded retries with backoff at start, and Lease calls that fail softly (the process-level
behaviour is in tests/cluster/test_controller_start.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.leases import LeaseTiming, _LeaseApi
from ai_models.controller import main
from ai_models.controller.settings import ControllerSettings
from kubeemu.pytest_fixtures import RunningEmulator
from support.api_gate import ApiGate


@pytest.fixture
def gate(
    kube_emulator: RunningEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ApiGate]:
    """A closed gate to the emulator, named by KUBECONFIG; the client's default configuration,
    which `load_config` replaces, is restored afterwards."""
    previous = k8s.Configuration.get_default_copy()
    with ApiGate(kube_emulator) as gate:
        monkeypatch.setenv(
            "KUBECONFIG", str(gate.kubeconfig(kube_emulator.superuser, tmp_path / "kubeconfig"))
        )
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        yield gate
    k8s.Configuration.set_default(previous)


@pytest.fixture
def three_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main, "START_ATTEMPTS", 3)


@pytest.mark.usefixtures("three_attempts")
def test_start_gives_up_after_bounded_attempts_with_growing_backoff(
    gate: ApiGate, caplog: pytest.LogCaptureFixture
) -> None:
    delays: list[float] = []
    with (
        caplog.at_level(logging.WARNING, logger="ai_models.controller.main"),
        pytest.raises(
            main.KubernetesUnreachable, match=r"did not answer in 3 attempts .*KUBECONFIG"
        ) as raised,
    ):
        main._load_kube_configuration(sleep=delays.append)
    assert f"port={gate.port}" in str(raised.value)  # it was the gate that refused
    assert delays == [2.0, 4.0]
    retries = [
        record
        for record in caplog.records
        if record.getMessage() == "Kubernetes API not reachable yet, retrying"
    ]
    assert [(getattr(r, "attempt", None), getattr(r, "retry_in_seconds", None)) for r in retries] == [
        (1, 2.0),
        (2, 4.0),
    ]


@pytest.mark.usefixtures("three_attempts")
def test_start_waits_out_an_api_server_that_comes_up(gate: ApiGate) -> None:
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        gate.open()  # the API server is up by the next attempt

    api = main._load_kube_configuration(sleep=sleep)
    try:
        assert k8s.VersionApi(api).get_code().git_version
    finally:
        api.close()
    assert delays == [2.0]


@pytest.mark.usefixtures("three_attempts")
def test_a_stalled_api_server_times_out_instead_of_blocking_the_start(
    gate: ApiGate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(main, "START_REQUEST_TIMEOUT", (0.5, 0.5))
    gate.stall()
    with pytest.raises(main.KubernetesUnreachable):
        main._load_kube_configuration(sleep=lambda _: None)
    assert gate.accepted >= 3  # every attempt reached the server and timed out


def test_the_default_lease_calls_end_within_the_renew_deadline() -> None:
    settings = ControllerSettings()
    timing = LeaseTiming(
        lease_duration=settings.controller_lease_duration_seconds,
        renew_deadline=settings.controller_renew_deadline_seconds,
        retry_period=settings.controller_retry_period_seconds,
    )
    connect, read = timing.request_timeout()
    assert connect + read <= timing.renew_deadline < timing.lease_duration


class FlakyLeases:
    def __init__(self) -> None:
        self.failures: list[Exception] = []
        self.calls: list[dict[str, Any]] = []

    def read_namespaced_lease(self, name: str, namespace: str, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        if self.failures:
            raise self.failures.pop(0)
        return f"{namespace}/{name}"


def test_lease_calls_have_a_timeout_and_an_unreachable_server_is_a_failed_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = FlakyLeases()
    api = _LeaseApi(leases, lease="ai-models-controller", timing=LeaseTiming(15, 10, 2))
    refused = urllib3.exceptions.MaxRetryError(None, "/apis/coordination.k8s.io", reason=None)  # type: ignore[arg-type]
    leases.failures = [refused, ConnectionResetError("reset"), ApiException(status=404)]
    with caplog.at_level(logging.INFO, logger="ai_models.adapters.kube.leases"):
        for _ in range(2):
            with pytest.raises(ApiException) as raised:
                api.read_namespaced_lease("ai-models-controller", "d8-ai-models")
            assert raised.value.status == 0  # what the election retries after its retry period
        with pytest.raises(ApiException) as answered:
            api.read_namespaced_lease("ai-models-controller", "d8-ai-models")
        assert answered.value.status == 404  # the server's own answers pass through
        assert (
            api.read_namespaced_lease("ai-models-controller", "d8-ai-models")
            == "d8-ai-models/ai-models-controller"
        )
    assert all(call["_request_timeout"] == (2.0, 8.0) for call in leases.calls)
    assert [record.getMessage() for record in caplog.records] == [
        "cannot reach the Kubernetes API for the Lease; retrying",  # once per outage
        "the Kubernetes API answers the Lease again",
    ]
