"""The one rendering of byte counts for people (status.artifact.size, messages)."""

from __future__ import annotations

import pytest

from ai_models.domain.models.source import spec_source_type
from ai_models.domain.sizes import size_text
from ai_models.names import SourceType


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (4 * 1024**2 + 200 * 1024, "4.2 MiB"),
        (int(12.3 * 1024**3), "12.3 GiB"),
        # Rounding up to 1024.0 of a unit prints the next unit instead.
        (1024**3 - 1, "1.0 GiB"),
        (3 * 1024**5, "3072.0 TiB"),
    ],
)
def test_sizes_read_in_the_largest_binary_unit(count: int, text: str) -> None:
    assert size_text(count) == text


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ({"url": "https://huggingface.co/a/b"}, SourceType.HUGGING_FACE),
        ({"url": "https://huggingface.co/a/b", "authSecretRef": {"name": "s"}}, SourceType.HUGGING_FACE),
        ({"upload": {}}, SourceType.UPLOAD),
        ({"catalog": {"sourceName": "hf", "name": "a/b"}}, SourceType.CATALOG),
        ({}, None),
        ({"upload": {}, "url": "https://huggingface.co/a/b"}, None),
    ],
)
def test_the_source_kind_is_read_from_the_spec(source: dict[str, object], kind: SourceType | None) -> None:
    assert spec_source_type({"spec": {"source": source}}) is kind
