"""The node cache on disk: published trees with their stamps, references, quarantine and staging.

The layout is the shared claim's (`domain.delivery.claim_layout`) plus the node cache's own records
(`domain.delivery.node_cache`), so a tree is written by the materializer's verified copy and is
complete only with its completion record. Every record is written to a temporary name, fsync'd and
renamed, so a killed plugin leaves either the old record or the new one.

Stamps: at publication every file's mtime is set one second into the past and its size and mtime
are recorded; any later write moves the mtime to now, so `intact()` (a stat per file, cheap enough
for every NodePublish) sees a changed file; `rehash()` (the scrub) reads every byte.
The last use of a tree is the mtime of its completion record (kept across restarts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ai_models.adapters.serving.tree import fsync_directory, is_complete
from ai_models.domain.delivery.claim_layout import (
    COMPLETE_SUFFIX,
    OBJECTS_DIR,
    STAGING_DIR,
    completion_record,
    object_dir,
)
from ai_models.domain.delivery.materialization import CompletionRecord
from ai_models.domain.delivery.node_cache import (
    LAYOUT_DIRS,
    QUARANTINE_DIR,
    REFS_DIR,
    STAMPS_SUFFIX,
    TRASH_DIR,
    reference_record,
    stamps_record,
)

logger = logging.getLogger(__name__)

HASH_BUFFER_BYTES: Final = 1024 * 1024
MAX_RECORD_BYTES: Final = 64 * 1024
MAX_STAMPS_BYTES: Final = 64 * 1024 * 1024
_ENTRY_PREFIX: Final = "sha256-"


@dataclasses.dataclass(frozen=True)
class ReadyTree:
    digest: str
    size_bytes: int
    stamps: dict[str, tuple[int, int]]  # path -> (size, mtime_ns)


@dataclasses.dataclass(frozen=True)
class Reference:
    """A mount target's hold on a tree, as written before the mount."""

    target: str
    digest: str
    pod_uid: str
    held_at: float

    def to_json(self) -> bytes:
        return json.dumps(
            {"target": self.target, "digest": self.digest, "podUID": self.pod_uid, "heldAt": self.held_at},
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Reference | None:
        try:
            document = json.loads(data)
            reference = cls(
                target=str(document["target"]),
                digest=str(document["digest"]),
                pod_uid=str(document["podUID"]),
                held_at=float(document["heldAt"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return reference


@dataclasses.dataclass(frozen=True)
class Quarantined:
    path: Path
    digest: str
    since: float  # seconds since the epoch
    size_bytes: int


def digest_of_entry(name: str) -> str | None:
    """`sha256:<hex>` of a layout entry name `sha256-<hex>[...]`, None for anything else."""
    if not name.startswith(_ENTRY_PREFIX):
        return None
    hexdigest = name.removeprefix(_ENTRY_PREFIX)[:64]
    if len(hexdigest) != 64 or any(char not in "0123456789abcdef" for char in hexdigest):
        return None
    return f"sha256:{hexdigest}"


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root

    # The root.

    def prepare(self) -> None:
        """The layout's directories exist; leftovers of an interrupted eviction are removed."""
        for name in LAYOUT_DIRS:
            (self.root / name).mkdir(parents=True, exist_ok=True)
        for leftover in (self.root / TRASH_DIR).iterdir():
            _remove(leftover)

    def usable(self) -> bool:
        """The root is a directory the plugin can write to (a probe file written and removed)."""
        probe = self.root / f".probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError:
            return False
        return True

    def free_bytes(self) -> int:
        """Free bytes for the cache; 0 when the root cannot be looked at (an unusable root holds nothing)."""
        try:
            stats = os.statvfs(self.root)
        except OSError:
            return 0
        return stats.f_bavail * stats.f_frsize

    def tree_path(self, digest: str) -> Path:
        return self.root / object_dir(digest)

    # Published trees.

    def published_digests(self) -> list[str]:
        """Digests with anything in objects/: a tree, its record or its stamps (checked by the caller)."""
        found = set()
        for path in (self.root / OBJECTS_DIR).iterdir():
            digest = digest_of_entry(path.name)
            entry = f"{_ENTRY_PREFIX}{digest.removeprefix('sha256:')}" if digest else ""
            if digest is not None and path.name in (
                entry,
                f"{entry}{COMPLETE_SUFFIX}",
                f"{entry}{STAMPS_SUFFIX}",
            ):
                found.add(digest)
        return sorted(found)

    def record(self, digest: str) -> CompletionRecord | None:
        return is_complete(self.root, digest)

    def load_stamps(self, digest: str, record: CompletionRecord) -> ReadyTree | None:
        """The tree with the stamps taken at its publication; None when there are none (or they do
        not list exactly the record's files): the tree was never stamped and must be re-hashed."""
        try:
            document = json.loads((self.root / stamps_record(digest)).read_bytes()[:MAX_STAMPS_BYTES])
            stamps = {str(path): (int(size), int(mtime)) for path, (size, mtime) in document.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        if set(stamps) != {item.path for item in record.files}:
            return None
        return ReadyTree(digest=digest, size_bytes=record.size_bytes, stamps=stamps)

    def stamp(self, digest: str, record: CompletionRecord, *, now: float) -> ReadyTree:
        """Set every file's mtime one second before `now` and record sizes and mtimes."""
        tree = self.tree_path(digest)
        mtime_ns = int((now - 1) * 1e9)
        stamps: dict[str, tuple[int, int]] = {}
        for item in record.files:
            path = tree / item.path
            os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=False)
            stats = path.lstat()
            stamps[item.path] = (stats.st_size, stats.st_mtime_ns)
        _write_atomically(
            self.root / stamps_record(digest),
            json.dumps({path: list(pair) for path, pair in sorted(stamps.items())}).encode(),
        )
        return ReadyTree(digest=digest, size_bytes=record.size_bytes, stamps=stamps)

    def intact(self, tree: ReadyTree) -> bool:
        """Every file still has the size and mtime of its publication (a stat each)."""
        base = self.tree_path(tree.digest)
        for path, (size, mtime_ns) in tree.stamps.items():
            try:
                stats = (base / path).lstat()
            except OSError:
                return False
            if stats.st_size != size or stats.st_mtime_ns != mtime_ns or not _regular(stats.st_mode):
                return False
        return True

    def rehash(self, digest: str, record: CompletionRecord, *, buffer: bytearray) -> str | None:
        """None when every file's sha256 matches the record; else the first path that does not."""
        base = self.tree_path(digest)
        view = memoryview(buffer)
        for item in record.files:
            hasher = hashlib.sha256()
            try:
                with (base / item.path).open("rb") as source:
                    while count := source.readinto(view):
                        hasher.update(view[:count])
            except OSError:
                return item.path
            if hasher.hexdigest() != item.sha256:
                return item.path
        return None

    def last_used(self, digest: str) -> float:
        try:
            return (self.root / completion_record(digest)).stat().st_mtime
        except OSError:
            return 0.0

    def touch(self, digest: str, *, now: float) -> None:
        try:
            os.utime(self.root / completion_record(digest), (now, now))
        except OSError as error:
            logger.warning(
                "cannot record the last use of a tree", extra={"digest": digest, "error": str(error)}
            )

    def quarantine(self, digest: str, *, now: float) -> Quarantined | None:
        """Take a damaged tree out of objects/ (pods that mount it keep their bind mounts)."""
        size = self._unpublish(digest)
        tree = self.tree_path(digest)
        if not tree.exists():
            return None
        moved = self.root / QUARANTINE_DIR / f"{tree.name}.{int(now * 1e9)}"
        os.rename(tree, moved)
        fsync_directory(tree.parent)
        return Quarantined(path=moved, digest=digest, since=now, size_bytes=size or _tree_bytes(moved))

    def quarantined(self) -> list[Quarantined]:
        found = []
        for path in (self.root / QUARANTINE_DIR).iterdir():
            digest = digest_of_entry(path.name)
            _, _, since = path.name.rpartition(".")
            if digest is None or not since.isdigit():
                _remove(path)
                continue
            found.append(
                Quarantined(path=path, digest=digest, since=int(since) / 1e9, size_bytes=_tree_bytes(path))
            )
        return found

    def evict(self, digest: str) -> None:
        """Remove a published tree: records first (never a record without its tree), then the tree."""
        self._unpublish(digest)
        self.discard(self.tree_path(digest))

    def discard(self, path: Path) -> None:
        """Remove a directory by renaming it into trash/ first (a killed removal is finished by
        `prepare`)."""
        if not path.exists() and not path.is_symlink():
            return
        trash = self.root / TRASH_DIR / f"{path.name}.{time.time_ns()}"
        os.rename(path, trash)
        _remove(trash)

    def forget(self, digest: str) -> None:
        """Remove a record and stamps whose tree is gone."""
        self._unpublish(digest)

    def _unpublish(self, digest: str) -> int:
        record = self.record(digest)
        for name in (completion_record(digest), stamps_record(digest)):
            (self.root / name).unlink(missing_ok=True)
        fsync_directory(self.root / OBJECTS_DIR)
        return record.size_bytes if record is not None else 0

    # Staging.

    def staging(self) -> Iterator[tuple[str, Path]]:
        try:
            entries = list((self.root / STAGING_DIR).iterdir())
        except OSError:
            return  # an unusable root: nothing staged that could be counted
        for path in entries:
            digest = digest_of_entry(path.name)
            if digest is None or path.name != f"{_ENTRY_PREFIX}{digest.removeprefix('sha256:')}":
                continue
            yield digest, path

    @staticmethod
    def newest_write(path: Path) -> float:
        newest = path.lstat().st_mtime
        for directory, _subdirectories, names in os.walk(path):
            for name in names:
                try:
                    newest = max(newest, (Path(directory) / name).lstat().st_mtime)
                except OSError:
                    continue
        return newest

    @staticmethod
    def tree_bytes(path: Path) -> int:
        return _tree_bytes(path)

    # References.

    def write_reference(self, reference: Reference) -> None:
        _write_atomically(self.root / reference_record(reference.target), reference.to_json())

    def remove_reference(self, target: str) -> None:
        path = self.root / reference_record(target)
        if path.exists():
            path.unlink()
            fsync_directory(path.parent)

    def references(self) -> list[Reference]:
        found = []
        for path in (self.root / REFS_DIR).glob("*.json"):
            try:
                reference = Reference.from_json(path.read_bytes()[:MAX_RECORD_BYTES])
            except OSError:
                continue
            if reference is None or path.name != Path(reference_record(reference.target)).name:
                logger.warning("an unreadable reference record is ignored", extra={"path": str(path)})
                continue
            found.append(reference)
        return found


def _regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _tree_bytes(path: Path) -> int:
    total = 0
    for directory, _subdirectories, names in os.walk(path):
        for name in names:
            try:
                total += (Path(directory) / name).lstat().st_size
            except OSError:
                continue
    return total


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
