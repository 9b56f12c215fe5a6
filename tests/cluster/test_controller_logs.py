"""The controller's log as an operator reads it: one JSON object a line, about our objects, never a
framework's internals (kopf once put a 2 KB `settings=OperatorSettings(...)` field on every line)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster.catalog_stack import CatalogStack, catalog_stack
from fakes.hub import FakeModel
from fakes.hub_corpus import make_corpus

# The longest line the controller may write without a traceback: an object's name is at most 253
# characters and a message a sentence or two.
LINE_LIMIT = 1500


__all__ = ["catalog_stack"]  # the `stack` fixture


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(12, seed=3)


def test_no_log_line_carries_framework_settings_and_every_line_is_short_json(stack: CatalogStack) -> None:
    controller = stack.controller(AI_MODELS_LOG_FORMAT="json", AI_MODELS_LOG_LEVEL="Debug")
    stack.create_source("logs", opted_in=True)
    stack.eventually(
        lambda: stack.condition("logs", "Ready").get("reason") == "CatalogServed", what="a served catalog"
    )
    stack.annotate("logs", {"ai.deckhouse.io/catalog-sync-requested-at": "2026-12-01T00:00:00Z"})
    stack.eventually(lambda: len(stack.events("IndexingSucceeded")) >= 1, what="the Events of the pass")
    assert controller.terminate() == 0
    lines = [line for line in controller.log().splitlines() if line.strip()]
    assert lines
    entries: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is one JSON object
    for line, entry in zip(lines, entries, strict=True):
        assert "settings" not in entry, line[:300]
        assert "OperatorSettings" not in line, line[:300]
        assert "kopf" not in str(entry.get("logger", "")), line[:300]
        if "error" not in entry:  # a traceback may be long
            assert len(line) <= LINE_LIMIT, line[:300]
    about_the_source = [entry for entry in entries if "logs" in {str(value) for value in entry.values()}]
    assert about_the_source, "no log line names the source it is about"
