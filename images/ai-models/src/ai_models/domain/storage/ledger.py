"""The storage ledger and the one reservation rule every download and every verdict goes through.

A missing ledger, or one no inventory pass has confirmed, means usage is unknown: with a budget
the module then refuses to reserve (it cannot know what fits), without a budget nothing is ever
refused for lack of room. The catalog's download verdict calls `reserve(..., dry_run=True)`, so a
verdict and the real download always agree.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum

from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind


class Scope(enum.StrEnum):
    NAMESPACED = "Namespaced"
    CLUSTER = "Cluster"


class EntryState(enum.StrEnum):
    RESERVED = "Reserved"
    PUBLISHED = "Published"


@dataclasses.dataclass(frozen=True)
class Owner:
    """One incarnation of a Model or ClusterModel: its reference and its uid."""

    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> ModelKey:
        return ModelKey(ModelKind(self.kind), self.namespace, self.name)


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    owner: Owner
    scope: Scope
    size_bytes: int
    state: EntryState


@dataclasses.dataclass(frozen=True)
class Absence:
    """What the inventory pass found unowned under `prefix`, first seen so at `since` (see
    `domain.storage.orphans`); kept here so a controller restart does not start the wait anew."""

    prefix: str
    uid: str
    since: datetime.datetime


@dataclasses.dataclass(frozen=True)
class Ledger:
    entries: tuple[LedgerEntry, ...] = ()
    confirmed: bool = False
    absences: tuple[Absence, ...] = ()

    def bytes_in(self, state: EntryState) -> int:
        return sum(entry.size_bytes for entry in self.entries if entry.state is state)


class Refusal(enum.StrEnum):
    """Why a reservation is refused; the Model condition reasons of the same names."""

    STORAGE_USAGE_UNKNOWN = "StorageUsageUnknown"
    INSUFFICIENT_STORAGE = "InsufficientStorage"


@dataclasses.dataclass(frozen=True)
class Reservation:
    """Outcome of `reserve`: the ledger to store when accepted, the refusal otherwise."""

    ledger: Ledger | None
    refusal: Refusal | None
    available_bytes: int | None

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def usage_known(ledger: Ledger | None) -> bool:
    return ledger is not None and ledger.confirmed


def available_bytes(ledger: Ledger | None, *, capacity_bytes: int | None) -> int | None:
    """Free budget, or None when either the budget or the usage is unknown."""
    if capacity_bytes is None or ledger is None or not usage_known(ledger):
        return None
    used = ledger.bytes_in(EntryState.PUBLISHED) + ledger.bytes_in(EntryState.RESERVED)
    return max(capacity_bytes - used, 0)


def reserve(
    ledger: Ledger | None,
    *,
    owner: Owner,
    scope: Scope,
    size_bytes: int,
    capacity_bytes: int | None,
    dry_run: bool = False,
) -> Reservation:
    """Reserve `size_bytes` for `owner` before any byte is written.

    A repeated reservation for the same owner replaces the previous one, so a retried publication
    is never counted twice. With `dry_run` the ledger is returned unchanged.
    """
    if size_bytes < 0:
        raise ValueError(f"cannot reserve a negative size ({size_bytes} bytes)")
    others = tuple(
        entry
        for entry in (ledger.entries if ledger else ())
        if not (entry.owner == owner and entry.state is EntryState.RESERVED)
    )
    current = dataclasses.replace(ledger, entries=others) if ledger is not None else None
    free = available_bytes(current, capacity_bytes=capacity_bytes)
    if capacity_bytes is not None:
        if free is None:
            return Reservation(ledger=ledger, refusal=Refusal.STORAGE_USAGE_UNKNOWN, available_bytes=None)
        if size_bytes > free:
            return Reservation(ledger=ledger, refusal=Refusal.INSUFFICIENT_STORAGE, available_bytes=free)
    if dry_run:
        return Reservation(ledger=ledger, refusal=None, available_bytes=free)
    entry = LedgerEntry(owner=owner, scope=scope, size_bytes=size_bytes, state=EntryState.RESERVED)
    base = current if current is not None else Ledger(confirmed=False)
    return Reservation(
        ledger=dataclasses.replace(base, entries=(*base.entries, entry)),
        refusal=None,
        available_bytes=None if free is None else free - size_bytes,
    )


def _without(ledger: Ledger | None, owner: Owner, *states: EntryState) -> Ledger:
    base = ledger if ledger is not None else Ledger(confirmed=False)
    kept = tuple(entry for entry in base.entries if not (entry.owner == owner and entry.state in states))
    return dataclasses.replace(base, entries=kept)


def commit(ledger: Ledger | None, *, owner: Owner, scope: Scope, size_bytes: int) -> Ledger:
    """Record `owner`'s published artifact, replacing its reservations and any earlier artifact.

    Committing onto a missing ledger creates one that is not confirmed: only an inventory pass
    knows everything the store holds.
    """
    if size_bytes < 0:
        raise ValueError(f"cannot commit a negative size ({size_bytes} bytes)")
    base = _without(ledger, owner, EntryState.RESERVED, EntryState.PUBLISHED)
    entry = LedgerEntry(owner=owner, scope=scope, size_bytes=size_bytes, state=EntryState.PUBLISHED)
    return dataclasses.replace(base, entries=(*base.entries, entry))


def release_reservation(ledger: Ledger | None, *, owner: Owner) -> Ledger | None:
    """Drop `owner`'s reservations (a failed or abandoned publication); None stays None."""
    if ledger is None:
        return None
    return _without(ledger, owner, EntryState.RESERVED)


def release(ledger: Ledger | None, *, owner: Owner) -> Ledger | None:
    """Drop everything `owner` holds (its object was deleted and its artifacts removed)."""
    if ledger is None:
        return None
    return _without(ledger, owner, EntryState.RESERVED, EntryState.PUBLISHED)


@dataclasses.dataclass(frozen=True)
class ScopeUsage:
    scope: Scope
    used_bytes: int
    reserved_bytes: int
    artifacts: int


def usage_by_scope(ledger: Ledger) -> tuple[ScopeUsage, ...]:
    """Used and reserved bytes and published artifacts per scope, both scopes always listed."""
    result = []
    for scope in Scope:
        entries = [entry for entry in ledger.entries if entry.scope is scope]
        result.append(
            ScopeUsage(
                scope=scope,
                used_bytes=sum(e.size_bytes for e in entries if e.state is EntryState.PUBLISHED),
                reserved_bytes=sum(e.size_bytes for e in entries if e.state is EntryState.RESERVED),
                artifacts=sum(1 for e in entries if e.state is EntryState.PUBLISHED),
            )
        )
    return tuple(result)
