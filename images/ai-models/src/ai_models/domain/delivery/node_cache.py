"""The node cache's rules (NodeCache mode): where its state lives beside the claim layout, how much
a new artifact may take, which trees to evict for it, and the report a node publishes.

    objects/, staging/               as on a shared claim (`claim_layout`): the same verified copy
    objects/sha256-<hex>.stamps      size and mtime of every file, taken at publication
    refs/<sha256 of target>.json     one per mounted target: the tree it holds (written before the mount)
    quarantine/sha256-<hex>.<ns>     a tree found damaged: out of objects/, kept while pods mount it

Space: the budget is the configured size capped by what the cache could have on its filesystem
(what it holds now plus the free space). Trees, reservations of downloads in flight, quarantined
trees and staging left behind all count. A new artifact fits when its size is at most what is left;
otherwise unreferenced trees go, least recently used first, but only once their grace since the last
use has passed; a referenced tree never goes.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from collections.abc import Sequence
from typing import Final

from ai_models.domain.delivery.claim_layout import OBJECTS_DIR, STAGING_DIR, object_dir
from ai_models.domain.sizes import size_text

REFS_DIR: Final = "refs"
QUARANTINE_DIR: Final = "quarantine"
TRASH_DIR: Final = "trash"
STAMPS_SUFFIX: Final = ".stamps"
REPORT_MAX_DIGESTS: Final = 256
# Staging of a digest nobody asks for any more is removed after this long without a write.
ABANDONED_STAGING_SECONDS: Final = 24 * 3600
LAYOUT_DIRS: Final = (OBJECTS_DIR, STAGING_DIR, REFS_DIR, QUARANTINE_DIR, TRASH_DIR)


def stamps_record(digest: str) -> str:
    """The root-relative path of the file stamps of `object_dir(digest)`."""
    return f"{object_dir(digest)}{STAMPS_SUFFIX}"


def reference_record(target: str) -> str:
    """The root-relative path of the reference a mount `target` holds (any string is a safe name)."""
    return f"{REFS_DIR}/{hashlib.sha256(target.encode()).hexdigest()}.json"


@dataclasses.dataclass(frozen=True)
class CachedTree:
    """A ready tree as eviction sees it."""

    digest: str
    size_bytes: int
    last_used: float  # seconds since the epoch
    referenced: bool


@dataclasses.dataclass(frozen=True)
class Space:
    """What the cache holds and may hold, in bytes. `held_bytes`: on disk now (trees, quarantine,
    staging); `committed_bytes`: trees + quarantine + abandoned staging + the full size of every
    reservation (a download's staging is inside its reservation)."""

    limit_bytes: int
    free_bytes: int  # the filesystem's free space for the cache's user
    held_bytes: int
    committed_bytes: int

    @property
    def capacity_bytes(self) -> int:
        return max(0, min(self.limit_bytes, self.held_bytes + self.free_bytes))

    @property
    def available_bytes(self) -> int:
        return max(0, self.capacity_bytes - self.committed_bytes)


@dataclasses.dataclass(frozen=True)
class Fits:
    evict: tuple[str, ...]  # digests to evict first (least recently used first); empty: fits as is


@dataclasses.dataclass(frozen=True)
class WaitForGrace:
    """It fits once unreferenced trees still within their grace become evictable."""

    message: str
    retry_at: float


@dataclasses.dataclass(frozen=True)
class DoesNotFit:
    message: str


Room = Fits | WaitForGrace | DoesNotFit


def make_room(
    *,
    needed_bytes: int,
    space: Space,
    trees: Sequence[CachedTree],
    reserved_bytes: int,
    grace_seconds: float,
    now: float,
    what: str,
) -> Room:
    """Whether `needed_bytes` for `what` fit, and which trees go for them. `reserved_bytes` is the
    part of `space.committed_bytes` other downloads in flight reserved (named in the messages)."""
    shortfall = needed_bytes - space.available_bytes
    if shortfall <= 0:
        return Fits(evict=())
    unreferenced = sorted((tree for tree in trees if not tree.referenced), key=lambda tree: tree.last_used)
    evictable = [tree for tree in unreferenced if tree.last_used + grace_seconds <= now]
    chosen: list[str] = []
    freed = 0
    for tree in evictable:
        if freed >= shortfall:
            break
        chosen.append(tree.digest)
        freed += tree.size_bytes
    if freed >= shortfall:
        return Fits(evict=tuple(chosen))
    referenced = [tree for tree in trees if tree.referenced]
    holders = (
        f"{size_text(sum(tree.size_bytes for tree in referenced))} in {len(referenced)} trees pods on this "
        f"node mount, {size_text(reserved_bytes)} reserved by other downloads, "
        f"{size_text(sum(tree.size_bytes for tree in unreferenced))} in {len(unreferenced)} unused trees"
    )
    if freed + sum(tree.size_bytes for tree in unreferenced if tree not in evictable) >= shortfall:
        waiting = [tree for tree in unreferenced if tree not in evictable]
        retry_at = min(tree.last_used + grace_seconds for tree in waiting)
        return WaitForGrace(
            message=f"waiting for space for {what}: needs {size_text(needed_bytes)}, "
            f"{size_text(space.available_bytes)} available of {size_text(space.capacity_bytes)} ({holders}); "
            f"unused trees may be evicted {grace_seconds:.0f} s after their last use",
            retry_at=retry_at,
        )
    return DoesNotFit(
        message=f"{what} needs {size_text(needed_bytes)} but the node cache has "
        f"{size_text(space.available_bytes)} available of {size_text(space.capacity_bytes)} even "
        f"after evicting every unused tree ({holders}); raise delivery.nodeCache.size, free disk "
        "space on the node, or schedule the workload to another node"
    )


def progress(done: int, total: int) -> str:
    """'3.1 of 16.0 GiB' in the unit of the total."""
    if total < 1024:
        return f"{done} of {total} B"
    unit_index = 0
    scaled = float(total)
    while scaled >= 1024 and unit_index < 4:
        scaled /= 1024
        unit_index += 1
    divisor = 1024**unit_index
    unit = ("B", "KiB", "MiB", "GiB", "TiB")[unit_index]
    return f"{done / divisor:.1f} of {total / divisor:.1f} {unit}"


@dataclasses.dataclass(frozen=True)
class CacheReport:
    """What a node says about its cache (the Node annotation; the controller reads `limit_bytes`)."""

    limit_bytes: int
    used_bytes: int
    available_bytes: int
    ready_digests: tuple[str, ...]

    def annotation(self, *, now: datetime.datetime) -> str:
        """The compact JSON of the report annotation: ready digests sorted, at most 256."""
        digests = sorted(self.ready_digests)
        document: dict[str, object] = {
            "limitBytes": self.limit_bytes,
            "usedBytes": self.used_bytes,
            "availableBytes": self.available_bytes,
            "readyDigests": digests[:REPORT_MAX_DIGESTS],
        }
        if len(digests) > REPORT_MAX_DIGESTS:
            document["truncated"] = True
        document["updatedAt"] = (
            now.astimezone(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        )
        return json.dumps(document, separators=(",", ":"))


def abandoned(*, newest_write: float, now: float, wanted: bool) -> bool:
    """Whether a staging directory is left over: nobody wants its digest and nothing wrote to it
    for a day (a wanted digest resumes from it instead)."""
    return not wanted and newest_write + ABANDONED_STAGING_SECONDS <= now
