"""The node cache: the artifacts pods on this node mount, one verified tree per digest.

    want(digest)  ready and intact          -> Ready(tree)        (a stat per file, no I/O beyond)
                  a file changed            -> quarantined, downloaded again
                  downloading               -> Waiting("downloading ... 3.1 of 16.0 GiB")
                  failed lately / no room   -> Failed / Unfit      (until the backoff passes)
                  otherwise                 -> a download starts   -> Waiting

`want` never blocks on the network: one background download per digest however many pods ask (a
single flight), at most `max_concurrent_downloads` copying at once. Space is reserved after the
manifest and before the first byte (`eviction.Budget` over `domain.delivery.node_cache.make_room`),
evicting unreferenced trees least recently used first once their grace passed. A mount target's
reference is on disk before its bind mount (`hold`) and goes after the unmount (`release`), so a
restarted plugin knows what is mounted and eviction never takes a mounted tree. A background pass
removes stale staging, quarantined trees nobody mounts any more and references whose target is
gone, and re-hashes every ready tree once a day (the scrub).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ai_models.adapters.serving.tree import BUFFER_BYTES, Retry
from ai_models.domain.artifacts.manifest import ArtifactFile
from ai_models.domain.backoff import Backoff
from ai_models.domain.delivery.claim_layout import object_dir
from ai_models.domain.delivery.node_cache import CacheReport, DoesNotFit, Fits, abandoned
from ai_models.domain.models.reference import ModelKey
from ai_models.nodecache.downloads import (
    ClientSettings,
    Download,
    Finished,
    NoRoom,
    Phase,
    Stopped,
)
from ai_models.nodecache.eviction import Budget, Holdings
from ai_models.nodecache.store import Reference, Store

logger = logging.getLogger(__name__)

# A refused (no room) digest is asked again this long after, or as soon as space is released.
UNFIT_RETRY_SECONDS: Final = 30.0
FAILURE_BACKOFF: Final = Backoff(base=5.0, cap=300.0)
HOUSEKEEPING_SECONDS: Final = 60.0
SCRUB_SECONDS: Final = 24 * 3600.0
# How long a waiting download sleeps at most before it looks at the space again.
RECHECK_SECONDS: Final = 5.0
CLOSE_JOIN_SECONDS: Final = 10.0


@dataclasses.dataclass(frozen=True)
class CacheRequest:
    """One artifact a pod on this node needs (already authorized)."""

    ref: ModelKey
    digest: str  # sha256:<hex>


@dataclasses.dataclass(frozen=True)
class Ready:
    """Complete, verified, safe to bind-mount."""

    tree: Path


@dataclasses.dataclass(frozen=True)
class Waiting:
    """Queued or downloading: what it waits for."""

    message: str


@dataclasses.dataclass(frozen=True)
class Unfit:
    """Does not fit the budget even after evicting every unreferenced tree (names the sizes)."""

    message: str


@dataclasses.dataclass(frozen=True)
class Failed:
    """The last download failed (cause and fix); retried after a backoff."""

    message: str


CacheState = Ready | Waiting | Unfit | Failed


@dataclasses.dataclass(frozen=True)
class CacheConfig:
    root: Path
    limit_bytes: int
    api_url: str
    token_file: Path
    ca_file: str | None = None
    max_concurrent_downloads: int = 2
    eviction_grace_seconds: float = 600.0
    housekeeping_seconds: float = HOUSEKEEPING_SECONDS
    scrub_seconds: float = SCRUB_SECONDS
    retry: Retry = dataclasses.field(default_factory=Retry)
    clock: Callable[[], float] = time.time
    # The filesystem's free bytes for the cache (tests give a full disk); None: statvfs of the root.
    free_bytes: Callable[[], int] | None = None


@dataclasses.dataclass(frozen=True)
class _Outcome:
    state: Unfit | Failed
    retry_at: float
    failures: int


class NodeCache:
    def __init__(self, config: CacheConfig) -> None:
        self._config = config
        self._clock = config.clock
        self._store = Store(config.root)
        self._store.prepare()
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._held = Holdings(
            references={reference.target: reference for reference in self._store.references()},
            quarantine=self._store.quarantined(),
        )
        self._budget = Budget(
            store=self._store,
            limit_bytes=config.limit_bytes,
            free_bytes=config.free_bytes or self._store.free_bytes,
            grace_seconds=config.eviction_grace_seconds,
        )
        self._downloads: dict[str, Download] = {}
        self._outcomes: dict[str, _Outcome] = {}
        self._slots_in_use: set[str] = set()
        for digest in self._store.published_digests():
            self._open(digest)
        self._client = ClientSettings(
            api_url=config.api_url, token_file=config.token_file, ca_file=config.ca_file
        )
        logger.info(
            "node cache opened",
            extra={
                "root": str(config.root),
                "ready": len(self._held.ready),
                "references": len(self._held.references),
                "limit_bytes": config.limit_bytes,
            },
        )
        self._background = threading.Thread(
            target=self._keep_house, name="node-cache-housekeeping", daemon=True
        )
        self._background.start()

    # What NodePublish and the prefetch ask.

    def want(self, request: CacheRequest) -> CacheState:
        """The digest's state now; starts (or joins) its download when it is not ready."""
        object_dir(request.digest)  # a ValueError names a malformed digest
        with self._lock:
            return self._want(request)

    def wait(self, request: CacheRequest, *, timeout: float) -> CacheState:
        """As `want`, waiting at most `timeout` seconds for a download to end."""
        deadline = time.monotonic() + timeout
        object_dir(request.digest)
        with self._lock:
            state = self._want(request)
            while isinstance(state, Waiting):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    break
                self._changed.wait(min(remaining, 1.0))
                state = self._want(request)
            return state

    def hold(self, *, target: str, digest: str, pod_uid: str) -> None:
        """Record on disk (fsync'd) that `target` mounts the tree of `digest`: before the mount."""
        now = self._clock()
        reference = Reference(target=target, digest=digest, pod_uid=pod_uid, held_at=now)
        with self._lock:
            kept = self._held.references.get(target)
            if kept is not None and (kept.digest, kept.pod_uid) == (digest, pod_uid):
                # kubelet publishes a mounted target again: the record on disk already says so.
                self._store.touch(digest, now=now)
                return
            self._store.write_reference(reference)
            self._held.references[target] = reference
            self._store.touch(digest, now=now)

    def release(self, *, target: str) -> None:
        """Drop the reference `target` holds (none: nothing to do); after its unmount."""
        with self._lock:
            reference = self._held.references.pop(target, None)
            self._store.remove_reference(target)
            if reference is not None:
                self._store.touch(reference.digest, now=self._clock())
            self._space_changed()

    def report(self) -> CacheReport:
        with self._lock:
            space = self._budget.measure(self._held)
            return CacheReport(
                limit_bytes=space.capacity_bytes,
                used_bytes=space.held_bytes,
                available_bytes=space.available_bytes,
                ready_digests=tuple(sorted(self._held.ready)),
            )

    def usable(self) -> bool:
        """The cache root can be written to (the readiness label and /healthz depend on it)."""
        return not self._stop.is_set() and self._store.usable()

    def close(self) -> None:
        """Stop downloads where they are (staging is resumed by the next plugin) and the background."""
        self._stop.set()
        with self._lock:
            self._changed.notify_all()
            downloads = list(self._downloads.values())
        deadline = time.monotonic() + CLOSE_JOIN_SECONDS
        for download in downloads:
            download.thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._background.join(timeout=max(0.0, deadline - time.monotonic()))

    # Maintenance (the background thread; tests call them directly).

    def housekeeping(self) -> None:
        """Remove what nobody needs: references of targets gone for longer than the grace, quarantined
        trees no reference older than the quarantine holds, staging abandoned for a day."""
        now = self._clock()
        with self._lock:
            for target, reference in list(self._held.references.items()):
                if reference.held_at + self._config.eviction_grace_seconds <= now and not os.path.lexists(
                    target
                ):
                    logger.info("a reference whose target is gone is dropped", extra={"target": target})
                    self._held.references.pop(target)
                    self._store.remove_reference(target)
            for entry in list(self._held.quarantine):
                if not any(
                    reference.digest == entry.digest and reference.held_at <= entry.since
                    for reference in self._held.references.values()
                ):
                    self._store.discard(entry.path)
                    self._held.quarantine.remove(entry)
            for digest, path in list(self._store.staging()):
                wanted = digest in self._downloads
                if abandoned(newest_write=self._store.newest_write(path), now=now, wanted=wanted):
                    logger.info("abandoned staging removed", extra={"digest": digest})
                    self._store.discard(path)
            self._space_changed()

    def scrub(self) -> list[str]:
        """Re-hash every ready tree; a damaged one is quarantined (and downloaded again when next
        wanted). The digests found damaged."""
        damaged = []
        buffer = bytearray(BUFFER_BYTES)
        with self._lock:
            trees = list(self._held.ready.values())
        for tree in trees:
            if self._stop.is_set():
                break
            record = self._store.record(tree.digest)
            bad = (
                "(the completion record)"
                if record is None
                else self._store.rehash(tree.digest, record, buffer=buffer)
            )
            if bad is None:
                continue
            with self._lock:
                if self._held.ready.get(tree.digest) is tree:
                    self._quarantine_tree(tree.digest, why=f"file {bad} does not match its sha256")
                    damaged.append(tree.digest)
        return damaged

    # Inside the lock.

    def _want(self, request: CacheRequest) -> CacheState:
        digest = request.digest
        if self._stop.is_set():
            return Failed(message="the node cache is shutting down; kubelet retries on the next plugin")
        now = self._clock()
        tree = self._held.ready.get(digest)
        if tree is not None:
            if self._store.intact(tree):
                self._store.touch(digest, now=now)
                return Ready(tree=self._store.tree_path(digest))
            self._quarantine_tree(digest, why="a file changed after publication")
        download = self._downloads.get(digest)
        if download is not None:
            return Waiting(message=download.describe())
        outcome = self._outcomes.get(digest)
        if outcome is not None and now < outcome.retry_at:
            return outcome.state
        return Waiting(message=self._start(request).describe())

    def _start(self, request: CacheRequest) -> Download:
        stop = self._stop
        unverified = self._held.unverified.pop(request.digest, None)
        if unverified is not None:
            # Being re-hashed: its space is this download's reservation, and it is not evictable.
            self._held.reservations[request.digest] = unverified

        def sleep(seconds: float) -> None:
            if stop.wait(seconds):
                raise Stopped

        download = Download(
            ref=request.ref,
            digest=request.digest,
            root=self._config.root,
            client=self._client,
            admit=self._admit,
            finished=self._finished,
            stop=stop,
            retry=dataclasses.replace(self._config.retry, sleep=sleep),
        )
        self._downloads[request.digest] = download
        logger.info("download started", extra={"digest": request.digest, "model": request.ref.describe()})
        download.start()
        return download

    def _open(self, digest: str) -> None:
        """Sort what a previous plugin left in objects/: ready (record and intact stamps), unverified
        (a record but no stamps: re-hashed by its first `want`, counted and evictable meanwhile), or
        damaged and quarantined (pods may still mount it: it leaves objects/, not the disk)."""
        record = self._store.record(digest)
        if record is None:
            if self._store.tree_path(digest).exists():
                self._quarantine_tree(digest, why="no completion record that matches the tree")
            else:
                self._store.forget(digest)
            return
        tree = self._store.load_stamps(digest, record)
        if tree is None:
            self._held.unverified[digest] = record.size_bytes
        elif self._store.intact(tree):
            self._held.ready[digest] = tree
        else:
            self._quarantine_tree(digest, why="a file changed while the plugin was not running")

    def _quarantine_tree(self, digest: str, *, why: str) -> None:
        logger.warning(
            "a cached tree is damaged; it is quarantined and fetched again",
            extra={"digest": digest, "why": why},
        )
        self._held.ready.pop(digest, None)
        self._held.unverified.pop(digest, None)
        entry = self._store.quarantine(digest, now=self._clock())
        if entry is not None:
            self._held.quarantine.append(entry)

    def _space_changed(self) -> None:
        # Released space may let a refused digest fit: it is asked again at its next `want`.
        for digest, outcome in list(self._outcomes.items()):
            if isinstance(outcome.state, Unfit):
                del self._outcomes[digest]
        self._changed.notify_all()

    # Called by a download's thread.

    def _admit(self, download: Download, files: tuple[ArtifactFile, ...]) -> None:
        """Reserve the artifact's space (evicting for it) and take a download slot; blocks while it
        must wait, raises `NoRoom` when it cannot fit."""
        needed = sum(item.size for item in files)
        digest = download.digest
        with self._lock:
            download.phase = Phase.SPACE
            while True:
                if self._stop.is_set():
                    raise Stopped
                now = self._clock()
                room = self._budget.reserve(
                    self._held, digest=digest, needed_bytes=needed, what=download.what, now=now
                )
                if isinstance(room, Fits):
                    break
                if isinstance(room, DoesNotFit):
                    raise NoRoom(room.message)
                download.detail = room.message
                self._changed.wait(min(max(room.retry_at - now, 0.05), RECHECK_SECONDS))
            download.phase = Phase.SLOT
            while len(self._slots_in_use) >= self._config.max_concurrent_downloads:
                if self._stop.is_set():
                    raise Stopped
                most = self._config.max_concurrent_downloads
                download.detail = f"{len(self._slots_in_use)} downloads run, at most {most}"
                self._changed.wait(RECHECK_SECONDS)
            download.detail = ""
            self._slots_in_use.add(digest)

    def _finished(self, download: Download, outcome: Finished) -> None:
        digest = download.digest
        delivered = outcome.delivered
        if delivered is not None and delivered.skipped:
            # Complete on disk but never stamped (a plugin killed right after publishing, or a tree
            # from elsewhere): every byte is checked before it may be mounted.
            download.phase = Phase.VERIFYING
            record = self._store.record(digest)
            bad = (
                "(the completion record)"
                if record is None
                else self._store.rehash(digest, record, buffer=bytearray(BUFFER_BYTES))
            )
            if bad is not None:
                with self._lock:
                    self._quarantine_tree(digest, why=f"file {bad} does not match its sha256")
                    # Fetched again at the next `want`, without a backoff: nothing failed remotely.
                    self._downloads.pop(digest, None)
                    self._held.reservations.pop(digest, None)
                    self._slots_in_use.discard(digest)
                    self._outcomes.pop(digest, None)
                    self._changed.notify_all()
                return
        with self._lock:
            self._downloads.pop(digest, None)
            self._held.reservations.pop(digest, None)
            self._slots_in_use.discard(digest)
            now = self._clock()
            record = self._store.record(digest) if delivered is not None else None
            left = self._store.record(digest) if record is None else None
            if left is not None and digest not in self._held.ready:
                # An unverified tree whose check never ran (the attempt failed before it): still on
                # disk, so counted and evictable again.
                self._held.unverified[digest] = left.size_bytes
            if record is not None:
                self._held.unverified.pop(digest, None)
                self._held.ready[digest] = self._store.stamp(digest, record, now=now)
                self._store.touch(digest, now=now)
                self._outcomes.pop(digest, None)
                logger.info(
                    "artifact ready",
                    extra={
                        "digest": digest,
                        "bytes": record.size_bytes,
                        "bytes_fetched": download.tally.fetched,
                        "bytes_reused": download.tally.reused,
                        "seconds": round(download.seconds(), 3),
                    },
                )
            elif outcome.no_room:
                self._outcomes[digest] = _Outcome(
                    state=Unfit(outcome.message), retry_at=now + UNFIT_RETRY_SECONDS, failures=0
                )
            elif not self._stop.is_set():
                failures = self._outcomes[digest].failures + 1 if digest in self._outcomes else 1
                delay = FAILURE_BACKOFF.delay(failures)
                message = outcome.message or f"the download of {download.what} ended without a tree"
                logger.warning(
                    "download failed", extra={"digest": digest, "error": message, "retry_in": delay}
                )
                self._outcomes[digest] = _Outcome(
                    state=Failed(f"{message} (tried {failures} times; the next attempt in {delay:.0f} s)"),
                    retry_at=now + delay,
                    failures=failures,
                )
            self._changed.notify_all()

    def _keep_house(self) -> None:
        next_scrub = time.monotonic() + self._config.scrub_seconds
        while not self._stop.wait(self._config.housekeeping_seconds):
            try:
                self.housekeeping()
                if time.monotonic() >= next_scrub:
                    next_scrub = time.monotonic() + self._config.scrub_seconds
                    self.scrub()
            except OSError as error:
                logger.error("node cache housekeeping failed", extra={"error": str(error)})
