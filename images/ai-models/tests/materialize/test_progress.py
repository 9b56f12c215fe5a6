"""The materializer's progress lines: at most one every PROGRESS_INTERVAL_SECONDS, whatever the
number of pieces copied (an injected clock, no waiting)."""

from __future__ import annotations

import logging

import pytest

from ai_models.adapters.serving.tree import PROGRESS_INTERVAL_SECONDS, Tally


def test_progress_is_logged_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.125  # exact in binary: no drift across the boundaries
        return now[0]

    tally = Tally(total=1000, reused=100, clock=clock)
    with caplog.at_level(logging.INFO, logger="ai_models.adapters.serving.tree"):
        for _ in range(160):  # 20 s of pieces
            tally.count(4)
    lines = [record for record in caplog.records if record.getMessage() == "materializing"]
    assert len(lines) == int(20 / PROGRESS_INTERVAL_SECONDS)
    assert lines[-1].__dict__["bytes_done"] == 100 + 4 * 160
    assert lines[-1].__dict__["percent"] == 74
