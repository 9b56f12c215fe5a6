"""Publishing and deleting in the ledger: `commit` turns a reservation into a published artifact,
`release_reservation` and `release` give bytes back, `usage_by_scope` sums them per scope."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.storage.ledger import (
    EntryState,
    Ledger,
    LedgerEntry,
    Owner,
    Scope,
    ScopeUsage,
    available_bytes,
    commit,
    release,
    release_reservation,
    reserve,
    usage_by_scope,
)

BOUNDED = settings(max_examples=300, deadline=None)
GIB = 1024**3
LLAMA = Owner(kind="Model", namespace="team-a", name="llama", uid="u1")
QWEN = Owner(kind="ClusterModel", namespace="", name="qwen", uid="u2")
MISTRAL = Owner(kind="Model", namespace="team-b", name="mistral", uid="u3")
LLAMA_RECREATED = dataclasses.replace(LLAMA, uid="u4")


def entry(owner: Owner, size: int, state: EntryState, scope: Scope = Scope.NAMESPACED) -> LedgerEntry:
    return LedgerEntry(owner=owner, scope=scope, size_bytes=size, state=state)


def reserved(ledger: Ledger | None, owner: Owner, size: int, scope: Scope = Scope.NAMESPACED) -> Ledger:
    outcome = reserve(ledger, owner=owner, scope=scope, size_bytes=size, capacity_bytes=None)
    assert outcome.ledger is not None
    return outcome.ledger


def held(ledger: Ledger | None, owner: Owner) -> set[tuple[EntryState, int]]:
    return {
        (item.state, item.size_bytes) for item in (ledger.entries if ledger else ()) if item.owner == owner
    }


def test_commit_replaces_the_owners_reservation() -> None:
    ledger = reserved(Ledger(confirmed=True), LLAMA, 5 * GIB)
    committed = commit(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=4 * GIB)
    assert committed.entries == (entry(LLAMA, 4 * GIB, EntryState.PUBLISHED),)
    assert committed.confirmed is True
    assert committed.bytes_in(EntryState.RESERVED) == 0


def test_commit_replaces_an_earlier_published_artifact_of_the_same_owner() -> None:
    ledger = Ledger(entries=(entry(LLAMA, 3 * GIB, EntryState.PUBLISHED),), confirmed=True)
    ledger = reserved(ledger, LLAMA, 7 * GIB)  # a new revision is being published
    assert held(ledger, LLAMA) == {(EntryState.PUBLISHED, 3 * GIB), (EntryState.RESERVED, 7 * GIB)}
    committed = commit(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=7 * GIB)
    assert held(committed, LLAMA) == {(EntryState.PUBLISHED, 7 * GIB)}
    assert committed.bytes_in(EntryState.PUBLISHED) == 7 * GIB


def test_commit_keeps_everyone_else() -> None:
    others = (
        entry(QWEN, GIB, EntryState.PUBLISHED, Scope.CLUSTER),
        entry(MISTRAL, 2 * GIB, EntryState.RESERVED),
        entry(LLAMA_RECREATED, 3 * GIB, EntryState.PUBLISHED),  # same name, another object
    )
    ledger = Ledger(entries=(*others, entry(LLAMA, 9, EntryState.RESERVED)), confirmed=True)
    committed = commit(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=8)
    assert committed.entries[: len(others)] == others
    assert held(committed, LLAMA) == {(EntryState.PUBLISHED, 8)}


def test_commit_onto_no_ledger_creates_an_unconfirmed_one() -> None:
    committed = commit(None, owner=QWEN, scope=Scope.CLUSTER, size_bytes=GIB)
    assert committed == Ledger(
        entries=(entry(QWEN, GIB, EntryState.PUBLISHED, Scope.CLUSTER),), confirmed=False
    )
    assert available_bytes(committed, capacity_bytes=100 * GIB) is None  # usage stays unknown


def test_commit_keeps_an_unconfirmed_ledger_unconfirmed() -> None:
    assert commit(Ledger(), owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=1).confirmed is False


def test_commit_without_a_reservation_is_accepted() -> None:
    committed = commit(Ledger(confirmed=True), owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=0)
    assert committed.entries == (entry(LLAMA, 0, EntryState.PUBLISHED),)


def test_commit_refuses_a_negative_size() -> None:
    with pytest.raises(ValueError, match="negative"):
        commit(Ledger(confirmed=True), owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=-1)


def test_commit_does_not_change_the_ledger_it_was_given() -> None:
    ledger = reserved(Ledger(confirmed=True), LLAMA, 5)
    before = ledger.entries
    commit(ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=4)
    assert ledger.entries == before


def test_release_reservation_drops_only_the_owners_reservation() -> None:
    ledger = Ledger(
        entries=(
            entry(LLAMA, 3, EntryState.PUBLISHED),
            entry(LLAMA, 5, EntryState.RESERVED),
            entry(MISTRAL, 7, EntryState.RESERVED),
        ),
        confirmed=True,
    )
    released = release_reservation(ledger, owner=LLAMA)
    assert released == Ledger(
        entries=(entry(LLAMA, 3, EntryState.PUBLISHED), entry(MISTRAL, 7, EntryState.RESERVED)),
        confirmed=True,
    )
    assert release_reservation(released, owner=LLAMA) == released  # nothing left to release


def test_release_drops_everything_the_owner_holds() -> None:
    ledger = Ledger(
        entries=(
            entry(LLAMA, 3, EntryState.PUBLISHED),
            entry(LLAMA, 5, EntryState.RESERVED),
            entry(LLAMA_RECREATED, 6, EntryState.RESERVED),
            entry(QWEN, 7, EntryState.PUBLISHED, Scope.CLUSTER),
        ),
        confirmed=True,
    )
    released = release(ledger, owner=LLAMA)
    assert released == Ledger(
        entries=(
            entry(LLAMA_RECREATED, 6, EntryState.RESERVED),
            entry(QWEN, 7, EntryState.PUBLISHED, Scope.CLUSTER),
        ),
        confirmed=True,
    )


def test_releasing_from_no_ledger_stays_no_ledger() -> None:
    assert release(None, owner=LLAMA) is None
    assert release_reservation(None, owner=LLAMA) is None


def test_releasing_keeps_the_confirmation() -> None:
    for confirmed in (False, True):
        ledger = Ledger(entries=(entry(LLAMA, 1, EntryState.PUBLISHED),), confirmed=confirmed)
        assert release(ledger, owner=LLAMA) == Ledger(confirmed=confirmed)
        assert release_reservation(ledger, owner=LLAMA) == ledger


def test_usage_by_scope_lists_both_scopes_even_when_empty() -> None:
    assert usage_by_scope(Ledger()) == (
        ScopeUsage(scope=Scope.NAMESPACED, used_bytes=0, reserved_bytes=0, artifacts=0),
        ScopeUsage(scope=Scope.CLUSTER, used_bytes=0, reserved_bytes=0, artifacts=0),
    )


def test_usage_by_scope_sums_published_and_reserved_bytes_separately() -> None:
    ledger = Ledger(
        entries=(
            entry(LLAMA, 3, EntryState.PUBLISHED),
            entry(LLAMA, 5, EntryState.RESERVED),
            entry(MISTRAL, 11, EntryState.PUBLISHED),
            entry(QWEN, 7, EntryState.PUBLISHED, Scope.CLUSTER),
            entry(dataclasses.replace(QWEN, name="phi", uid="u9"), 13, EntryState.RESERVED, Scope.CLUSTER),
        ),
        confirmed=True,
    )
    namespaced, cluster = usage_by_scope(ledger)
    assert namespaced == ScopeUsage(scope=Scope.NAMESPACED, used_bytes=14, reserved_bytes=5, artifacts=2)
    assert cluster == ScopeUsage(scope=Scope.CLUSTER, used_bytes=7, reserved_bytes=13, artifacts=1)
    assert namespaced.used_bytes + cluster.used_bytes == ledger.bytes_in(EntryState.PUBLISHED)
    assert namespaced.reserved_bytes + cluster.reserved_bytes == ledger.bytes_in(EntryState.RESERVED)


def test_a_full_publication_frees_the_difference_between_reservation_and_artifact() -> None:
    capacity = 10 * GIB
    ledger = Ledger(confirmed=True)
    outcome = reserve(
        ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=8 * GIB, capacity_bytes=capacity
    )
    assert outcome.ledger is not None
    assert available_bytes(outcome.ledger, capacity_bytes=capacity) == 2 * GIB
    published = commit(outcome.ledger, owner=LLAMA, scope=Scope.NAMESPACED, size_bytes=6 * GIB)
    assert available_bytes(published, capacity_bytes=capacity) == 4 * GIB
    deleted = release(published, owner=LLAMA)
    assert deleted is not None
    assert available_bytes(deleted, capacity_bytes=capacity) == capacity


# ----- model-based: any sequence of operations ---------------------------------------------------

OWNERS = (LLAMA, QWEN, MISTRAL, LLAMA_RECREATED)
Operation = tuple[Literal["reserve", "commit", "release_reservation", "release"], int, int]
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "commit", "release_reservation", "release"]),
        st.integers(min_value=0, max_value=len(OWNERS) - 1),
        st.integers(min_value=0, max_value=10 * GIB),
    ),
    max_size=30,
)


def scope_of(owner: Owner) -> Scope:
    return Scope.CLUSTER if owner.kind == "ClusterModel" else Scope.NAMESPACED


@given(operations=OPERATIONS, start_confirmed=st.sampled_from([None, False, True]))
@BOUNDED
def test_after_any_sequence_each_owner_holds_what_its_last_operations_left(
    operations: list[Operation], start_confirmed: bool | None
) -> None:
    ledger: Ledger | None = None if start_confirmed is None else Ledger(confirmed=start_confirmed)
    published: dict[Owner, int] = {}
    reservations: dict[Owner, int] = {}
    for name, index, size in operations:
        owner = OWNERS[index]
        if name == "reserve":
            ledger = reserved(ledger, owner, size, scope_of(owner))
            reservations[owner] = size
        elif name == "commit":
            ledger = commit(ledger, owner=owner, scope=scope_of(owner), size_bytes=size)
            published[owner] = size
            reservations.pop(owner, None)
        elif name == "release_reservation":
            ledger = release_reservation(ledger, owner=owner)
            reservations.pop(owner, None)
        else:
            ledger = release(ledger, owner=owner)
            reservations.pop(owner, None)
            published.pop(owner, None)
    total = sum(published.values()) + sum(reservations.values())
    if ledger is None:
        assert total == 0
        return
    assert ledger.bytes_in(EntryState.PUBLISHED) == sum(published.values())
    assert ledger.bytes_in(EntryState.RESERVED) == sum(reservations.values())
    assert sum(item.size_bytes for item in ledger.entries) == total
    for owner in OWNERS:
        expected = {(EntryState.PUBLISHED, size) for o, size in published.items() if o == owner}
        expected |= {(EntryState.RESERVED, size) for o, size in reservations.items() if o == owner}
        assert held(ledger, owner) == expected
        owned = [item for item in ledger.entries if item.owner == owner]
        assert len(owned) == len(expected)  # never two entries of one state for one owner
        assert all(item.scope is scope_of(owner) for item in owned)
    assert ledger.confirmed is bool(start_confirmed)
    usage = {row.scope: row for row in usage_by_scope(ledger)}
    for scope in Scope:
        assert usage[scope].used_bytes == sum(s for o, s in published.items() if scope_of(o) is scope)
        assert usage[scope].reserved_bytes == sum(s for o, s in reservations.items() if scope_of(o) is scope)
        assert usage[scope].artifacts == sum(1 for o in published if scope_of(o) is scope)
