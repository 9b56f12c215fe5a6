"""The catalog pages say what the module really does: its condition reasons and its API's shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ai_models.adapters.hub.errors import ProviderErrorReason
from ai_models.api.models import Problem, SearchPage
from ai_models.domain.storage.prerequisites import SATISFYING_REASONS, PrerequisitesReason
from ai_models.names import CatalogSourceEvent, CatalogSourceReason
from support.access_matrix import markdown_tables
from support.paths import DOCS_DIR

JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)
GUIDES = ["ADMIN_GUIDE.md", "ADMIN_GUIDE.ru.md"]


def _reason_table(page: str) -> list[list[str]]:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    [table] = [
        table for table in markdown_tables(text) if "`CatalogServed`" in " ".join(map(" ".join, table))
    ]
    return table


@pytest.mark.parametrize("page", GUIDES)
def test_documented_source_reasons_are_exactly_the_reasons_the_controller_sets(page: str) -> None:
    documented = {
        reason for row in _reason_table(page)[1:] for reason in re.findall(r"`([A-Za-z]+)`", row[2])
    }
    assert documented == {*CatalogSourceReason, *ProviderErrorReason}


@pytest.mark.parametrize("page", GUIDES)
def test_documented_source_events_are_the_events_the_controller_posts(page: str) -> None:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    for event in CatalogSourceEvent:
        assert f"`{event}`" in text


def _json_examples() -> list[tuple[str, object]]:
    return [
        (f"{page.name}#{index}", json.loads(block))
        for page in sorted(Path(DOCS_DIR).glob("*.md"))
        for index, block in enumerate(JSON_BLOCK.findall(page.read_text(encoding="utf-8")))
    ]


def test_the_user_guide_shows_a_search_page_and_a_problem() -> None:
    names = [name for name, _ in _json_examples()]
    assert "USER_GUIDE.md#0" in names
    assert "USER_GUIDE.ru.md#0" in names


@pytest.mark.parametrize(("name", "document"), _json_examples(), ids=[name for name, _ in _json_examples()])
def test_json_examples_are_valid_answers_of_the_api(name: str, document: object) -> None:
    assert isinstance(document, dict)
    if "items" in document:
        SearchPage.model_validate(document)
    else:
        Problem.model_validate(document)


def _prerequisites_table(page: str) -> list[list[str]]:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    [table] = [table for table in markdown_tables(text) if table[1][0] == "`Satisfied`"]
    return table


@pytest.mark.parametrize("page", GUIDES)
def test_documented_prerequisite_reasons_are_the_evaluators_with_their_metric_value(page: str) -> None:
    rows = _prerequisites_table(page)[1:]
    documented = {row[0].strip("`"): row[1] for row in rows}
    assert documented == {
        str(reason): "1" if reason in SATISFYING_REASONS else "0" for reason in PrerequisitesReason
    }
