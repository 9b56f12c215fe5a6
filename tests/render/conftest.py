"""Fixtures of the render suite: chart copies with probe templates (never the repository itself)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.probe import ProbeChart


@pytest.fixture(scope="session")
def probe_chart(tmp_path_factory: pytest.TempPathFactory) -> ProbeChart:
    """One shared copy for helper probes; tests only pass values, they never add files to it."""
    return ProbeChart(tmp_path_factory.mktemp("probe") / "ai-models")


@pytest.fixture
def chart_copy(tmp_path: Path) -> ProbeChart:
    """A private copy a test may add templates or monitoring files to."""
    return ProbeChart(tmp_path / "ai-models")
