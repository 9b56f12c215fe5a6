"""The controller's listeners bind port 0 and say which port they got, so nothing that starts the
process has to pick a port, release it and hope nobody takes it first."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from ai_models.controller.health import ProbeServer, ProbeState, serve_metrics


def _bound(caplog: pytest.LogCaptureFixture, message: str) -> str:
    records = [*caplog.get_records("setup"), *caplog.get_records("call")]
    [record] = [r for r in records if r.getMessage() == message]
    address: str = record.__dict__["address"]
    return address


@pytest.fixture
def probes(caplog: pytest.LogCaptureFixture) -> Iterator[ProbeServer]:
    caplog.set_level(logging.INFO, logger="ai_models.controller.health")
    server = ProbeServer(state=ProbeState(), address="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()


def test_probe_server_on_port_zero_logs_the_port_it_bound(
    probes: ProbeServer, caplog: pytest.LogCaptureFixture
) -> None:
    assert probes.port > 0
    assert _bound(caplog, "serving probes") == f"127.0.0.1:{probes.port}"
    with urllib.request.urlopen(f"http://127.0.0.1:{probes.port}/healthz", timeout=5) as response:
        assert response.read() == b"ok\n"


def test_serve_metrics_on_port_zero_logs_and_returns_the_port_it_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ai_models.controller.health")
    registry = CollectorRegistry()
    Counter("listener_test_total", "A counter only this test serves.", registry=registry).inc()
    port = serve_metrics(address="127.0.0.1", port=0, registry=registry)
    assert port > 0
    assert _bound(caplog, "serving metrics") == f"127.0.0.1:{port}"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert "listener_test_total 1.0" in response.read().decode()
