"""What the publisher sends to the Hub: revisions that cannot be rewritten on the way, hostile answers."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from publish.conftest import Kit

from ai_models.names import ModelReason
from ai_models.publish.main import EXIT_FAILED
from fakes.hub import FakeHub, repository

REPO = "acme/tiny-llama"


@pytest.mark.parametrize("revision", ["..", ".", "refs/../main", "%2e%2e"])
def test_a_traversal_revision_is_refused_before_the_hub_is_asked_and_never_publishes_main(
    kit: Kit, hub: FakeHub, revision: str
) -> None:
    # Today `..` goes out as /api/models/acme/tiny-llama/revision/.., which the HTTP client
    # normalizes to /api/models/acme/tiny-llama: the Hub answers for main, and main is published.
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    hub.reset_log()
    settings = kit.hf_settings(hub, dataclasses.replace(job, revision=revision))

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert REPO in result["message"]
    assert "branch, tag or commit" in result["message"]
    assert hub.requests() == []
    assert kit.keys(job.digest) == []
