"""The controller's probe server against hostile clients: connections that never send a request
cost a bounded number of handler threads, are closed after the socket timeout, and the probes keep
answering."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from ai_models.controller.health import ProbeServer, ProbeState
from fakes.stalled_readers import half_sent_requests, idle_connections
from support.eventually import eventually

MAX_HANDLERS = 8


@pytest.fixture
def probes() -> Iterator[ProbeServer]:
    state = ProbeState()
    state.mark_ready()
    server = ProbeServer(
        state=state, address="127.0.0.1", port=0, timeout_seconds=0.5, max_handlers=MAX_HANDLERS
    ).start()
    try:
        yield server
    finally:
        server.stop()


def _answers(server: ProbeServer, path: str) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{server.port}{path}", timeout=2).status_code
    except httpx.TransportError:
        return 0


def test_the_probe_server_survives_a_thousand_idle_connections_with_bounded_threads(
    probes: ProbeServer,
) -> None:
    before = threading.active_count()
    peak = before

    with idle_connections("127.0.0.1", probes.port, count=1000) as idle:

        def all_handled() -> bool:
            nonlocal peak
            peak = max(peak, threading.active_count())
            return idle.dropped() == 1000

        eventually(all_handled, timeout=60, message="every idle connection refused or timed out")
    assert peak <= before + MAX_HANDLERS, (before, peak)
    assert _answers(probes, "/healthz") == 200
    assert _answers(probes, "/readyz") == 200


def test_a_half_sent_probe_request_is_closed_after_the_timeout(probes: ProbeServer) -> None:
    with half_sent_requests("127.0.0.1", probes.port, count=MAX_HANDLERS) as half:
        eventually(lambda: half.dropped() == MAX_HANDLERS, timeout=20, message="half-sent requests closed")
    eventually(lambda: _answers(probes, "/healthz") == 200, message="the probe answering again")
