"""Process settings read from AI_MODELS_* variables."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ai_models.settings import Settings, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500Gi", 500 * 1024**3), ("1.5T", 1_500_000_000_000), ("1024", 1024), ("2Ki", 2048), ("3M", 3_000_000)],
)
def test_quantities_become_bytes(text: str, expected: int) -> None:
    assert parse_quantity(text) == expected


def test_capacity_limit_accepts_the_module_setting_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_MODELS_CAPACITY_LIMIT_BYTES", "10Gi")
    assert Settings().capacity_limit_bytes == 10 * 1024**3
    monkeypatch.setenv("AI_MODELS_CAPACITY_LIMIT_BYTES", "")
    assert Settings().capacity_limit_bytes is None


def test_bad_capacity_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AI_MODELS_CAPACITY_LIMIT_BYTES", "lots")
    with pytest.raises(ValidationError, match="not a quantity"):
        Settings()
