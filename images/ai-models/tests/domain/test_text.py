"""Counts in the module's sentences take the number of their noun."""

from __future__ import annotations

import pytest

from ai_models.domain.artifacts.profile import missing_facts
from ai_models.domain.text import counted


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, "0 files"), (1, "1 file"), (2, "2 files")],
)
def test_counted_takes_the_number_of_its_noun(count: int, expected: str) -> None:
    assert counted(count, "file") == expected


def test_counted_takes_an_irregular_plural() -> None:
    assert counted(3, "entry", "entries") == "3 entries"
    assert counted(1, "entry", "entries") == "1 entry"


def test_missing_facts_names_the_fields_a_partial_profile_lacks() -> None:
    assert missing_facts({"format": "Safetensors"}) == ("parameterCount", "contextWindowTokens")
    assert missing_facts({"format": "Diffusers", "parameterCount": 5}) == ()
    assert missing_facts({"format": "GGUF", "parameterCount": 5, "contextWindowTokens": 8}) == ()
