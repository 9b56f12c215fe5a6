"""When the inventory pass may remove what no object owns: after a grace period, never en masse.

One observation is not enough: an object list can come back empty by mistake, and a bucket can be
restored before the objects that own it (or a local stack restarted with its API objects gone).
So an artifact whose object is absent (by name and UID), a superseded artifact, files a dead
publication left, or a staged upload nobody will publish, is first only recorded with the time
it was first seen that way (`Absence`, kept in the ledger so a controller restart does not reset
it), and removed by a later pass once that time is `grace` old. Even then, when what is due
would take more than `max_fraction` of the stored bytes at once, nothing is removed: the pass
reports it (metric, alert) and an administrator decides. Pure: the pass observes, this decides.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

from ai_models.domain.storage.ledger import Absence, Owner


@dataclasses.dataclass(frozen=True)
class Candidate:
    """Something in the store the pass found nobody needs, observed now."""

    prefix: str  # what would be removed: everything under it
    uid: str  # the owner UID it was written for ("" when no manifest says)
    size_bytes: int
    why: str
    owner: Owner  # kind, namespace and name from its key, the UID as above
    digest: str = ""  # "" for a staged upload
    accounted: bool = True  # an artifact's bytes stay in the ledger while it waits


@dataclasses.dataclass(frozen=True)
class Decision:
    remove: tuple[Candidate, ...]  # due, and not too much at once
    waiting: tuple[Candidate, ...]  # within the grace period
    held: tuple[Candidate, ...]  # due, held back by the mass-removal guard
    absences: tuple[Absence, ...]  # to record for the next pass (the removed ones included)

    @property
    def blocked(self) -> bool:
        return bool(self.held)

    @property
    def kept(self) -> tuple[Candidate, ...]:
        return (*self.waiting, *self.held)


def decide(
    candidates: Iterable[Candidate],
    *,
    absences: Iterable[Absence],
    now: datetime.datetime,
    grace: datetime.timedelta,
    stored_bytes: int,
    max_fraction: float,
) -> Decision:
    """What this pass removes, keeps waiting or holds back, and the absences to record.

    A candidate is due once an earlier pass recorded the same prefix for the same UID at least
    `grace` ago: even with no grace at all it takes two passes. An absence whose candidate is
    gone (its object came back, or someone removed the files) is forgotten; a record from the
    future (a clock set back) just waits.
    """
    since = {(absence.prefix, absence.uid): absence.since for absence in absences}
    due: list[Candidate] = []
    waiting: list[Candidate] = []
    recorded: list[Absence] = []
    for candidate in sorted(candidates, key=lambda item: (item.prefix, item.uid)):
        first = since.get((candidate.prefix, candidate.uid))
        recorded.append(Absence(prefix=candidate.prefix, uid=candidate.uid, since=first or now))
        if first is not None and now - first >= grace:
            due.append(candidate)
        else:
            waiting.append(candidate)
    due_bytes = sum(item.size_bytes for item in due)
    if due and due_bytes > max_fraction * stored_bytes:
        return Decision(remove=(), waiting=tuple(waiting), held=tuple(due), absences=tuple(recorded))
    return Decision(remove=tuple(due), waiting=tuple(waiting), held=(), absences=tuple(recorded))
