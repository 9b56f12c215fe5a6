"""The status a Model shows in each situation: pinned to the table in the module's docstring."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ai_models.domain.models import status
from ai_models.domain.models.status import (
    FAILURE_REASONS,
    Situation,
    deleting,
    failed,
    pending,
    publishing,
    ready,
    shows,
    status_patch,
    waiting_for_upload,
)
from ai_models.names import ModelConditionType as Type
from ai_models.names import ModelPhase as Phase
from ai_models.names import ModelReason as Reason

T0 = datetime.datetime(2026, 3, 1, 10, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=1)
T2 = T0 + datetime.timedelta(minutes=2)
T3 = T0 + datetime.timedelta(minutes=3)

# What each docstring row's situation is built with (a row may be reached in several ways).
FACTORIES: dict[str, list[Callable[[], Situation]]] = {
    "waiting for a slot": [lambda: pending("waiting for a publication slot: 2 of 2 running")],
    "waiting for upload": [lambda: waiting_for_upload("upload the model to the URL in status.upload")],
    "publishing": [lambda: publishing("publishing"), lambda: publishing("re-publishing", damaged=True)],
    "published": [
        lambda: ready("published", metadata_complete=True, metadata_message="complete"),
        lambda: ready("published", metadata_complete=False, metadata_message="partial"),
    ],
    "failed": [functools.partial(failed, reason, f"failed: {reason}") for reason in sorted(FAILURE_REASONS)],
    "deleting": [lambda: deleting("removing the artifact")],
}


@dataclasses.dataclass(frozen=True)
class Row:
    situation: str
    phase: str
    artifact: str  # "False Publishing|ArtifactDamaged", "(kept)", ...
    ready: str


def documented_rows() -> list[Row]:
    rows = []
    for line in (status.__doc__ or "").splitlines():
        # Cells are separated by a pipe next to a space; "A|B" inside a cell lists alternatives.
        cells = [cell.strip() for cell in re.split(r"(?<=\s)\||\|(?=\s)", line.strip().strip("|"))]
        if len(cells) != 4 or cells[0] == "situation":
            continue
        rows.append(Row(*cells))
    return rows


def test_the_docstring_table_covers_every_phase_and_every_factory() -> None:
    rows = documented_rows()
    assert [row.situation for row in rows] == list(FACTORIES)
    assert sorted(row.phase for row in rows) == sorted(phase.value for phase in Phase)


def expected_condition(cell: str, situation: Situation) -> tuple[str, set[str]] | None:
    """(status, allowed reasons) a table cell documents; None for "(kept)"."""
    if cell == "(kept)":
        return None
    state, reasons = cell.split(" ", 1)
    if reasons == "<failure reason>":
        return state, {str(reason) for reason in FAILURE_REASONS}
    return state, set(reasons.split("|"))


EARLIER: list[dict[str, Any]] = [
    {"type": "Custom", "status": "True", "reason": "Other", "message": "", "lastTransitionTime": "x"},
    {
        "type": Type.ARTIFACT_RESOLVED,
        "status": "True",
        "reason": Reason.ARTIFACT_PUBLISHED,
        "message": "artifact published",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    },
]


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for condition in conditions:
        assert condition["type"] not in found, f"duplicate condition {condition['type']}"
        found[condition["type"]] = condition
    return found


@pytest.mark.parametrize(
    ("row", "make"),
    [
        pytest.param(row, make, id=f"{row.situation}-{make().artifact_reason}")
        for row in documented_rows()
        for make in FACTORIES[row.situation]
    ],
)
def test_each_situation_sets_the_phase_and_conditions_the_table_documents(
    row: Row, make: Callable[[], Situation]
) -> None:
    situation = make()
    patch = status_patch(situation, conditions=EARLIER, generation=4, now=T0)
    assert patch["phase"] == row.phase
    assert patch["observedGeneration"] == 4
    conditions = by_type(patch["conditions"])
    assert conditions["Custom"] == EARLIER[0]  # someone else's condition is left alone

    artifact = expected_condition(row.artifact, situation)
    if artifact is None:
        assert conditions[Type.ARTIFACT_RESOLVED] == EARLIER[1]
    else:
        state, reasons = artifact
        condition = conditions[Type.ARTIFACT_RESOLVED]
        assert condition["status"] == state
        assert condition["reason"] in reasons
        assert condition["reason"] == situation.artifact_reason
        assert condition["message"] == situation.message
        assert condition["observedGeneration"] == 4

    ready_expected = expected_condition(row.ready, situation)
    assert ready_expected is not None
    state, reasons = ready_expected
    ready_condition = conditions[Type.READY]
    assert (ready_condition["status"], {ready_condition["reason"]}) == (state, reasons)
    assert ready_condition["message"] == situation.message
    assert ready_condition["observedGeneration"] == 4

    if situation.phase is Phase.READY:
        metadata = conditions[Type.METADATA_RESOLVED]
        assert metadata["status"] == "True"
        assert metadata["reason"] in (Reason.MODEL_METADATA_CALCULATED, Reason.MODEL_METADATA_PARTIAL)
        assert metadata["message"] == situation.metadata_message
    else:
        assert Type.METADATA_RESOLVED not in conditions


def test_published_metadata_reason_follows_completeness() -> None:
    complete = ready("m", metadata_complete=True, metadata_message="all facts")
    partial = ready("m", metadata_complete=False, metadata_message="some facts")
    assert complete.metadata_reason is Reason.MODEL_METADATA_CALCULATED
    assert partial.metadata_reason is Reason.MODEL_METADATA_PARTIAL


def test_metadata_resolved_is_kept_once_known_while_republishing() -> None:
    published = status_patch(
        ready("m", metadata_complete=True, metadata_message="all"), conditions=None, generation=1, now=T0
    )
    damaged = status_patch(
        publishing("re-publishing", damaged=True), conditions=published["conditions"], generation=1, now=T1
    )
    assert (
        by_type(damaged["conditions"])[Type.METADATA_RESOLVED]
        == by_type(published["conditions"])[Type.METADATA_RESOLVED]
    )


# ----- lastTransitionTime ----------------------------------------------------------------------------


def transitions(patch: Mapping[str, Any]) -> dict[str, str]:
    return {item["type"]: item["lastTransitionTime"] for item in patch["conditions"]}


def test_transition_times_move_only_when_a_condition_status_changes() -> None:
    first = status_patch(pending("queued"), conditions=None, generation=1, now=T0)
    assert transitions(first) == {
        Type.ARTIFACT_RESOLVED: "2026-03-01T10:00:00Z",
        Type.READY: "2026-03-01T10:00:00Z",
    }

    # Pending -> Publishing: reasons and messages change, both stay False.
    second = status_patch(publishing("publishing"), conditions=first["conditions"], generation=1, now=T1)
    assert transitions(second) == transitions(first)
    assert by_type(second["conditions"])[Type.READY]["reason"] == Reason.PUBLISHING

    # Publishing -> Ready: both become True; MetadataResolved appears.
    third = status_patch(
        ready("done", metadata_complete=False, metadata_message="partial"),
        conditions=second["conditions"],
        generation=1,
        now=T2,
    )
    assert transitions(third) == dict.fromkeys(
        (Type.ARTIFACT_RESOLVED, Type.READY, Type.METADATA_RESOLVED), "2026-03-01T10:02:00Z"
    )

    # Ready -> Deleting: ArtifactResolved and MetadataResolved kept as they were; Ready turns False.
    fourth = status_patch(deleting("bye"), conditions=third["conditions"], generation=2, now=T3)
    kept = by_type(third["conditions"])
    now = by_type(fourth["conditions"])
    assert now[Type.ARTIFACT_RESOLVED] == kept[Type.ARTIFACT_RESOLVED]
    assert now[Type.METADATA_RESOLVED] == kept[Type.METADATA_RESOLVED]
    assert now[Type.READY]["lastTransitionTime"] == "2026-03-01T10:03:00Z"
    assert now[Type.READY]["observedGeneration"] == 2


def test_repeating_a_situation_changes_nothing_but_observed_generation() -> None:
    first = status_patch(failed(Reason.SOURCE_NOT_FOUND, "404"), conditions=None, generation=1, now=T0)
    again = status_patch(
        failed(Reason.SOURCE_NOT_FOUND, "404"), conditions=first["conditions"], generation=1, now=T3
    )
    assert again == first


def test_the_input_conditions_are_not_mutated() -> None:
    before = [dict(item) for item in EARLIER]
    status_patch(pending("x"), conditions=EARLIER, generation=9, now=T3)
    assert before == EARLIER


# ----- failed() and shows() ------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", sorted(set(Reason) - FAILURE_REASONS))
def test_failed_refuses_a_reason_that_is_not_a_failure(reason: Reason) -> None:
    with pytest.raises(ValueError, match=str(reason)):
        failed(reason, "message")


@pytest.mark.parametrize("reason", sorted(FAILURE_REASONS))
def test_failed_accepts_every_failure_reason(reason: Reason) -> None:
    assert failed(reason, "m") == Situation(Phase.FAILED, reason, "m")


ALL_SITUATIONS = [make() for makers in FACTORIES.values() for make in makers]


def shown(situation: Situation, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return status_patch(situation, conditions=conditions, generation=1, now=T0)


@pytest.mark.parametrize("situation", ALL_SITUATIONS, ids=lambda s: f"{s.phase}-{s.artifact_reason}")
def test_shows_is_true_for_the_status_a_situation_wrote(situation: Situation) -> None:
    assert shows(shown(situation, EARLIER), situation)


def test_shows_is_false_without_a_status() -> None:
    assert not shows(None, pending("m"))
    assert not shows({}, deleting("m"))


def test_shows_tells_apart_phase_reason_and_message() -> None:
    storage = failed(Reason.INSUFFICIENT_STORAGE, "needs 10 GiB, 2 GiB free")
    written = shown(storage)
    assert shows(written, storage)
    assert not shows(written, failed(Reason.INSUFFICIENT_STORAGE, "needs 10 GiB, 3 GiB free"))
    assert not shows(written, failed(Reason.STORAGE_USAGE_UNKNOWN, "needs 10 GiB, 2 GiB free"))
    assert not shows(written, pending("needs 10 GiB, 2 GiB free"))
    assert not shows({"phase": "Failed", "conditions": []}, storage)  # phase alone is not enough


def test_shows_deleting_needs_only_the_phase() -> None:
    assert shows({"phase": "Deleting"}, deleting("anything"))
    assert shows(shown(deleting("a"), EARLIER), deleting("b"))
    assert not shows(shown(ready("m", metadata_complete=True, metadata_message="")), deleting("m"))
