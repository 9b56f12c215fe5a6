"""Every English schema description has a Russian twin at the same path, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from support.paths import CRDS_DIR, OPENAPI_DIR
from support.schemawalk import descriptions, walk
from support.yamlfiles import load_yaml

CYRILLIC = re.compile(r"[А-Яа-яЁё]")
STRUCTURAL_KEYS = {"description", "properties", "items", "additionalProperties"}


def _crd_schema(document: dict[str, Any]) -> dict[str, Any]:
    [version] = document["spec"]["versions"]
    openapi: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return openapi


PAIRS = [
    pytest.param(
        OPENAPI_DIR / "config-values.yaml",
        OPENAPI_DIR / "doc-ru-config-values.yaml",
        lambda doc: doc,
        id="config-values",
    ),
    *(
        pytest.param(path, CRDS_DIR / f"doc-ru-{path.name}", _crd_schema, id=path.name)
        for path in sorted(CRDS_DIR.glob("ai.deckhouse.io_*.yaml"))
    ),
]


@pytest.mark.parametrize(("english_path", "russian_path", "schema_of"), PAIRS)
def test_russian_twin_describes_exactly_the_english_paths(
    english_path: Path, russian_path: Path, schema_of: Any
) -> None:
    english = descriptions(schema_of(load_yaml(english_path)))
    russian_schema = schema_of(load_yaml(russian_path))
    russian = descriptions(russian_schema)
    assert set(russian) == set(english)
    for path, text in russian.items():
        assert CYRILLIC.search(text), f"{'.'.join(path)} is not translated"
    for path, text in english.items():
        assert not CYRILLIC.search(text), f"{'.'.join(path)}: Cyrillic in the English schema"
    for path, node in walk(russian_schema):
        assert set(node) <= STRUCTURAL_KEYS, (
            f"{'.'.join(path)}: only descriptions belong in {russian_path.name}"
        )
