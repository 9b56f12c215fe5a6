"""The api's settings: its own variables on top of the shared ones, and the index's memory budget."""

from __future__ import annotations

import pytest

from ai_models.api.settings import ApiSettings, api_settings
from ai_models.settings import Settings

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, 64 * MIB), (1024 * MIB, 128 * MIB), (64 * MIB, 16 * MIB), (8192 * MIB, 256 * MIB)],
)
def test_the_index_cache_is_an_eighth_of_the_memory_limit_within_bounds(
    limit: int | None, expected: int
) -> None:
    assert ApiSettings(memory_limit_bytes=limit).index_cache_bytes() == expected


def test_an_explicit_index_cache_wins() -> None:
    assert (
        ApiSettings(memory_limit_bytes=1024 * MIB, api_index_cache_bytes=32 * MIB).index_cache_bytes()
        == 32 * MIB
    )


def test_shared_settings_are_kept_and_the_api_ones_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AI_MODELS_API_PORT", "8000")
    monkeypatch.setenv("AI_MODELS_MEMORY_LIMIT_BYTES", str(512 * MIB))
    monkeypatch.setenv("AI_MODELS_API_INDEX_DIR", "/var/lib/ai-models/index")
    shared = Settings(capacity_limit_bytes=500 * 1024**3, namespace="elsewhere")
    merged = api_settings(shared)
    assert merged.capacity_limit_bytes == 500 * 1024**3
    assert merged.namespace == "elsewhere"
    assert merged.api_port == 8000
    assert merged.memory_limit_bytes == 512 * MIB
    assert str(merged.api_index_dir) == "/var/lib/ai-models/index"
    assert api_settings(merged) is merged
