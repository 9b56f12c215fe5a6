"""Fixtures for catalog tests: the fake Hub (fakes.hub), a Hub client on it, a directory store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_models.adapters.hub import HubClient
from ai_models.adapters.objectstore import DirectoryStore
from fakes.hub import FakeHub, fake_hub
from fakes.hub_corpus import FakeModel, make_corpus

__all__ = ["fake_hub", "fake_hub_corpus", "hub_client", "store"]


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    """Small enough for fast passes, large enough for several 25-model pages of every family."""
    return make_corpus(110, seed=1)


@pytest.fixture
def hub_client(fake_hub: FakeHub) -> Iterator[HubClient]:
    with HubClient(endpoint=fake_hub.url, token=None, retry_wait=0, max_retries=1) as client:
        yield client


@pytest.fixture
def store(tmp_path: Path) -> DirectoryStore:
    root = tmp_path / "store"
    root.mkdir()
    return DirectoryStore(root)
