"""The controller re-checks every source filter and re-syncs an unchanged catalog with list pages only.

One controller process, the emulator and a fake Hub that ignores the listing's pipeline tag and tag
filters, as a mirror that does not implement them would: a source limited to text generation must
still serve only text-generation models, and a requested re-sync of the unchanged catalog must cost
no config.json request.
"""

from __future__ import annotations

import pytest

from cluster.catalog_stack import CatalogStack, catalog_stack
from fakes.hub import FakeHub, FakeModel
from fakes.hub_corpus import make_corpus

__all__ = ["catalog_stack"]  # the `stack` fixture

SOURCE = "text-generation"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(120, seed=11)


def text_generation(hub: FakeHub) -> list[str]:
    return sorted(
        model.id for model in hub.models if model.pipeline_tag == "text-generation" and not model.gated
    )


def test_a_filter_the_hub_ignores_is_applied_and_an_unchanged_resync_costs_list_pages_only(
    stack: CatalogStack,
) -> None:
    stack.hub.ignore_filters("pipeline_tag", "filter")
    others = {model.pipeline_tag for model in stack.hub.models if not model.gated} - {"text-generation"}
    assert others, "the corpus must list models of other pipelines, or the filter is not tested"
    controller = stack.controller()
    stack.create_source(
        SOURCE,
        opted_in=True,
        spec={
            "provider": "HuggingFace",
            "huggingFace": {"pipelineTags": ["text-generation"]},
            "chunkSize": 50,
        },
    )
    stack.eventually(
        lambda: bool(stack.source(SOURCE).get("status", {}).get("servedGeneration")), what="a pass"
    )
    first = stack.source(SOURCE)["status"]["servedGeneration"]
    assert sorted(stack.served_ids(SOURCE)) == text_generation(stack.hub)
    assert stack.hub.count("resolve") > 0, "the first pass fetches configs"

    stack.hub.reset_log()
    stack.request_sync(SOURCE)
    stack.eventually(
        lambda: stack.source(SOURCE).get("status", {}).get("servedGeneration") not in (None, first),
        what="the requested re-sync",
    )

    assert sorted(stack.served_ids(SOURCE)) == text_generation(stack.hub)
    assert stack.hub.count("resolve") == 0
    assert {request.path for request in stack.hub.requests()} == {"/api/models"}
    assert controller.terminate() == 0
