"""Setting conditions the way Kubernetes tooling expects."""

from __future__ import annotations

import datetime

from ai_models.domain.conditions import find_condition, set_condition

T0 = datetime.datetime(2026, 11, 29, 19, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def test_new_condition_is_appended_with_its_transition_time() -> None:
    conditions = set_condition(
        None,
        type_="Ready",
        status=False,
        reason="WaitingForOptIn",
        message="m",
        observed_generation=1,
        now=T0,
    )
    assert conditions == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "WaitingForOptIn",
            "message": "m",
            "lastTransitionTime": "2026-11-29T19:00:00Z",
            "observedGeneration": 1,
        }
    ]


def test_same_status_keeps_the_transition_time_and_updates_reason_and_message() -> None:
    first = set_condition(
        None, type_="Indexing", status=True, reason="Indexing", message="0", observed_generation=1, now=T0
    )
    second = set_condition(
        first, type_="Indexing", status=True, reason="Indexing", message="100", observed_generation=2, now=T1
    )
    assert second[0]["lastTransitionTime"] == "2026-11-29T19:00:00Z"
    assert (second[0]["message"], second[0]["observedGeneration"]) == ("100", 2)


def test_status_change_moves_the_transition_time_and_keeps_other_conditions() -> None:
    ready = set_condition(
        None, type_="Ready", status=True, reason="CatalogServed", message="", observed_generation=1, now=T0
    )
    both = set_condition(
        ready, type_="Indexing", status=True, reason="Indexing", message="", observed_generation=1, now=T0
    )
    flipped = set_condition(
        both,
        type_="Ready",
        status=False,
        reason="ProviderUnavailable",
        message="",
        observed_generation=1,
        now=T1,
    )
    assert [item["type"] for item in flipped] == ["Ready", "Indexing"]
    assert find_condition(flipped, "Ready") == {
        "type": "Ready",
        "status": "False",
        "reason": "ProviderUnavailable",
        "message": "",
        "lastTransitionTime": "2026-11-29T19:05:00Z",
        "observedGeneration": 1,
    }
    assert find_condition(flipped, "Missing") is None
