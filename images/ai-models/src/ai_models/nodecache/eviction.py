"""The node cache's budget applied: what it holds measured on disk, the pure rule
(`domain.delivery.node_cache.make_room`) asked, and the trees it chose evicted.

`Holdings` is the cache's state the budget reads; `NodeCache` owns it and calls everything here
under its lock, so a reservation, an eviction and a new reference never interleave.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from ai_models.domain.delivery.node_cache import CachedTree, Fits, Room, Space, make_room
from ai_models.nodecache.store import Quarantined, ReadyTree, Reference, Store

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Holdings:
    ready: dict[str, ReadyTree] = dataclasses.field(default_factory=dict)
    # Complete trees a previous plugin never stamped: not mountable until re-hashed, but on disk.
    unverified: dict[str, int] = dataclasses.field(default_factory=dict)  # digest -> bytes
    references: dict[str, Reference] = dataclasses.field(default_factory=dict)  # by mount target
    reservations: dict[str, int] = dataclasses.field(default_factory=dict)  # digest -> bytes
    quarantine: list[Quarantined] = dataclasses.field(default_factory=list)

    def referenced(self, digest: str) -> bool:
        return any(reference.digest == digest for reference in self.references.values())


@dataclasses.dataclass(frozen=True)
class Budget:
    store: Store
    limit_bytes: int
    free_bytes: Callable[[], int]
    grace_seconds: float

    def measure(self, held: Holdings, *, admitting: str | None = None) -> Space:
        """Bytes on disk and committed; `admitting`'s own staging is inside the size it asks for."""
        trees = sum(tree.size_bytes for tree in held.ready.values()) + sum(held.unverified.values())
        quarantined = sum(entry.size_bytes for entry in held.quarantine)
        staged = 0
        abandoned_staging = 0
        for digest, path in self.store.staging():
            size = self.store.tree_bytes(path)
            staged += size
            if digest not in held.reservations and digest != admitting:
                abandoned_staging += size
        return Space(
            limit_bytes=self.limit_bytes,
            free_bytes=self.free_bytes(),
            held_bytes=trees + quarantined + staged,
            committed_bytes=trees + quarantined + abandoned_staging + sum(held.reservations.values()),
        )

    def reserve(self, held: Holdings, *, digest: str, needed_bytes: int, what: str, now: float) -> Room:
        """Ask the rule; when it fits, evict what it chose and record the reservation."""
        trees = [
            CachedTree(
                digest=tree.digest,
                size_bytes=tree.size_bytes,
                last_used=self.store.last_used(tree.digest),
                referenced=held.referenced(tree.digest),
            )
            for tree in held.ready.values()
        ]
        trees += [
            CachedTree(
                digest=digest,
                size_bytes=size,
                last_used=self.store.last_used(digest),
                referenced=held.referenced(digest),
            )
            for digest, size in held.unverified.items()
            if digest not in held.reservations  # being verified now
        ]
        room = make_room(
            needed_bytes=needed_bytes,
            space=self.measure(held, admitting=digest),
            trees=trees,
            reserved_bytes=sum(held.reservations.values()),
            grace_seconds=self.grace_seconds,
            now=now,
            what=what,
        )
        if isinstance(room, Fits):
            for victim in room.evict:
                if held.referenced(victim):  # the rule never chooses one; a bug must not unmount a pod
                    raise AssertionError(f"eviction chose {victim}, which a pod mounts")
                logger.info("tree evicted", extra={"digest": victim, "for": digest})
                held.ready.pop(victim, None)
                held.unverified.pop(victim, None)
                self.store.evict(victim)
            held.reservations[digest] = needed_bytes
        return room
