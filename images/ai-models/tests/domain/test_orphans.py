"""When the inventory pass may remove what no object owns (`domain.storage.orphans.decide`), and
how the ledger keeps the first-seen times across controller restarts."""

from __future__ import annotations

import datetime

import pytest

from ai_models.domain.storage.codec import ledger_from_json, ledger_to_json
from ai_models.domain.storage.ledger import Absence, EntryState, Ledger, LedgerEntry, Owner, Scope
from ai_models.domain.storage.orphans import Candidate, decide

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
GRACE = datetime.timedelta(hours=24)


def candidate(prefix: str, size: int = 10, uid: str = "u1") -> Candidate:
    owner = Owner(kind="Model", namespace="team-a", name=prefix, uid=uid)
    return Candidate(prefix=prefix, uid=uid, size_bytes=size, why="gone", owner=owner)


def seen(prefix: str, ago: datetime.timedelta, uid: str = "u1") -> Absence:
    return Absence(prefix=prefix, uid=uid, since=NOW - ago)


@pytest.mark.parametrize(
    ("absences", "removed", "waiting"),
    [
        ((), [], ["a"]),  # first observation: recorded only
        ((seen("a", GRACE - datetime.timedelta(seconds=1)),), [], ["a"]),  # within the grace period
        ((seen("a", GRACE),), ["a"], []),  # the grace period is over
        ((seen("a", GRACE, uid="other"),), [], ["a"]),  # another object's record: starts anew
        ((seen("a", -GRACE),), [], ["a"]),  # a record from the future (clock set back) waits
    ],
)
def test_a_candidate_is_removed_only_after_the_grace_period_across_passes(
    absences: tuple[Absence, ...], removed: list[str], waiting: list[str]
) -> None:
    decision = decide(
        [candidate("a")], absences=absences, now=NOW, grace=GRACE, stored_bytes=1000, max_fraction=0.5
    )
    assert [item.prefix for item in decision.remove] == removed
    assert [item.prefix for item in decision.waiting] == waiting
    assert not decision.blocked


def test_without_a_grace_period_it_still_takes_two_passes() -> None:
    first = decide(
        [candidate("a")], absences=(), now=NOW, grace=datetime.timedelta(0), stored_bytes=100, max_fraction=1
    )
    assert first.remove == ()
    second = decide(
        [candidate("a")],
        absences=first.absences,
        now=NOW,
        grace=datetime.timedelta(0),
        stored_bytes=100,
        max_fraction=1,
    )
    assert [item.prefix for item in second.remove] == ["a"]


def test_the_first_seen_time_is_kept_and_records_of_what_came_back_are_forgotten() -> None:
    decision = decide(
        [candidate("a")],
        absences=(seen("a", datetime.timedelta(hours=2)), seen("back", datetime.timedelta(hours=5))),
        now=NOW,
        grace=GRACE,
        stored_bytes=1000,
        max_fraction=0.5,
    )
    assert decision.absences == (seen("a", datetime.timedelta(hours=2)),)


@pytest.mark.parametrize(
    ("due_bytes", "stored_bytes", "fraction", "blocked"),
    [
        (500, 1000, 0.5, False),  # exactly the threshold is allowed
        (501, 1000, 0.5, True),  # most of the store: held back
        (1000, 1000, 1.0, False),  # 1.0 turns the guard off
        (0, 0, 0.5, False),  # empty leftovers of an empty store
    ],
)
def test_due_removals_above_the_threshold_are_held_back_all_together(
    due_bytes: int, stored_bytes: int, fraction: float, blocked: bool
) -> None:
    items = [candidate("a", due_bytes // 2), candidate("b", due_bytes - due_bytes // 2)]
    absences = [seen("a", GRACE), seen("b", GRACE)]
    decision = decide(
        items, absences=absences, now=NOW, grace=GRACE, stored_bytes=stored_bytes, max_fraction=fraction
    )
    assert decision.blocked is blocked
    assert len(decision.remove) == (0 if blocked else 2)
    assert len(decision.held) == (2 if blocked else 0)
    assert len(decision.absences) == 2  # held ones keep their first-seen time


def test_the_ledger_stores_the_absences_and_reads_ledgers_written_before_them() -> None:
    owner = Owner(kind="Model", namespace="team-a", name="x", uid="u1")
    ledger = Ledger(
        entries=(LedgerEntry(owner=owner, scope=Scope.NAMESPACED, size_bytes=5, state=EntryState.PUBLISHED),),
        confirmed=True,
        absences=(Absence(prefix="artifacts/namespaced/team-a/x/ab/", uid="u1", since=NOW),),
    )
    assert ledger_from_json(ledger_to_json(ledger)) == ledger
    older = b'{"confirmed": true, "entries": []}'
    assert ledger_from_json(older) == Ledger(confirmed=True)
