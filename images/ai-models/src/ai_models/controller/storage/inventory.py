"""The inventory pass: what the object store really holds becomes the ledger's published entries.

It lists every artifact, matches each to its object, checks each manifest's files (present, same
size, same store version token), and rebuilds the ledger: one published entry per artifact of a
live object, sized by the bytes actually stored; reservations survive only for objects that are
still being published. What nobody owns (an object gone by name or UID, a superseded digest,
files a dead Job left without a manifest, a staged upload nobody will publish) is removed only
as `domain.storage.orphans` decides: after a grace period across passes, never most of the store
at once; each removal is logged and counted. Every problem is collected instead of stopping the
pass; only a pass without any marks the ledger confirmed. Damaged artifacts of Ready objects are
handed to the reconciler to be published again. The catalog indexes of deleted ModelCatalogSources
are withdrawn and removed by `controller.storage.catalogs` in the same pass; their problems are
reported apart, since the ledger does not count catalog bytes.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ai_models.adapters.kube.ledger_store import Change, LedgerStoreError
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.objectstore import ObjectInfo, ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.controller.accounting import Accounting
from ai_models.controller.storage.catalogs import CatalogSweep, CatalogSweepResult
from ai_models.controller.storage.metrics import StorageMetrics
from ai_models.domain.artifacts.layout import (
    ARTIFACTS_ROOT,
    CLUSTER_NAMESPACE_SEGMENT,
    FILES_DIR,
    MANIFEST_NAME,
    UPLOADS_ROOT,
    ArtifactLocation,
    locate,
    scope_of,
)
from ai_models.domain.artifacts.manifest import ArtifactManifest, ManifestFormatError, manifest_from_json
from ai_models.domain.jobs import is_running
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage import orphans
from ai_models.domain.storage.ledger import Absence, EntryState, Ledger, LedgerEntry, Owner
from ai_models.names import ARTIFACT_DIGEST_ANNOTATION, OWNER_UID_LABEL, ModelKind, ModelPhase

log = logging.getLogger(__name__)


@dataclasses.dataclass
class InventoryResult:
    errors: list[str] = dataclasses.field(default_factory=list)
    artifacts: int = 0
    stored_bytes: int = 0
    removed: list[str] = dataclasses.field(default_factory=list)
    removed_bytes: int = 0
    orphaned: list[orphans.Candidate] = dataclasses.field(default_factory=list)  # kept, not removed
    blocked: bool = False  # due removals held back by the mass-removal guard
    damaged: list[tuple[ModelKey, str]] = dataclasses.field(default_factory=list)
    catalogs: CatalogSweepResult | None = None  # None: the pass did not get to look at catalog/

    @property
    def clean(self) -> bool:
        return not self.errors


def _owner(obj: Mapping[str, Any]) -> Owner:
    meta = obj["metadata"]
    return Owner(kind=obj["kind"], namespace=meta.get("namespace") or "", name=meta["name"], uid=meta["uid"])


# Defaults of the controller settings inventory_orphan_grace_seconds and
# inventory_max_removal_fraction.
DEFAULT_GRACE = datetime.timedelta(hours=24)
DEFAULT_MAX_REMOVAL_FRACTION = 0.5


@dataclasses.dataclass
class _Found:
    """What one pass read before it judges anything; `candidates` collects what is unowned."""

    owners: list[dict[str, Any]]
    by_name: dict[tuple[str, str, str], dict[str, Any]]
    publishing: set[tuple[str, str]]
    before: Ledger | None
    groups: dict[ArtifactLocation, list[ObjectInfo]]
    candidates: list[orphans.Candidate] = dataclasses.field(default_factory=list)


def _candidate(location: ArtifactLocation, *, uid: str, size: int, why: str) -> orphans.Candidate:
    """A stored artifact nothing owns now, as the path names it (`uid` from its manifest, if any)."""
    path_owner = Owner(kind=location.kind.value, namespace=location.namespace, name=location.name, uid=uid)
    return orphans.Candidate(
        prefix=location.prefix, uid=uid, size_bytes=size, why=why, owner=path_owner, digest=location.digest
    )


def _ready_digest(obj: Mapping[str, Any]) -> str | None:
    """The digest a Ready object serves (None while it is not Ready, or records none)."""
    status = obj.get("status") or {}
    if status.get("phase") != ModelPhase.READY:
        return None
    digest = (status.get("artifact") or {}).get("digest")
    return str(digest) if digest else None


def _stored_bytes(found: _Found) -> int:
    return sum(info.size for infos in found.groups.values() for info in infos)


@dataclasses.dataclass
class InventoryPass:
    store: ObjectStore
    objects: ModelObjects
    accounting: Accounting
    job_cache: Callable[[], list[dict[str, Any]]]
    grace: datetime.timedelta = DEFAULT_GRACE
    max_removal_fraction: float = DEFAULT_MAX_REMOVAL_FRACTION
    metrics: StorageMetrics | None = None
    catalogs: CatalogSweep | None = None
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)

    def run(self) -> InventoryResult:
        with self.accounting.lock.exclusive():
            result = InventoryResult()
            found = self._read(result)
            if found is None:
                return result
            entries, seen = self._account_all(found, result)
            self._missing_artifacts(found.owners, seen, result)
            upload_bytes = self._uploads(found.by_name, found.publishing, result, found.candidates)
            before = found.before
            decision = orphans.decide(
                found.candidates,
                absences=before.absences if before is not None else (),
                now=self.clock(),
                grace=self.grace,
                stored_bytes=sum(info.size for infos in found.groups.values() for info in infos)
                + upload_bytes,
                max_fraction=self.max_removal_fraction,
            )
            removed = self._remove_due(decision, result)
            absences = tuple(item for item in decision.absences if (item.prefix, item.uid) not in removed)
            if self.catalogs is not None:
                result.catalogs = self.catalogs.run(
                    absences=before.absences if before is not None else (), now=self.clock()
                )
                absences += result.catalogs.absences
            result.orphaned, result.blocked = list(decision.kept), decision.blocked
            # What waits is still stored: the ledger keeps counting it, for the owner it was for.
            entries += [
                LedgerEntry(
                    owner=item.owner,
                    scope=scope_of(item.owner.kind),
                    size_bytes=item.size_bytes,
                    state=EntryState.PUBLISHED,
                )
                for item in decision.kept
                if item.accounted
            ]
            self._report(decision, result)
            self._write_ledger(found, entries, absences, result)
            return result

    def _read(self, result: InventoryResult) -> _Found | None:
        """The objects, the publications running, the ledger and the stored artifacts; None (with
        the error in `result`) when one of them cannot be read: nothing is judged then."""
        try:
            owners = [obj for kind in ModelKind for obj in self.objects.list_all(kind)]
        except Exception as error:
            result.errors.append(f"cannot list Models and ClusterModels: {error}")
            return None
        publishing = self._publishing()
        try:
            # What earlier passes found unowned, and since when; without a readable ledger
            # every wait starts now (a restart that lost the ledger removes nothing early).
            before = self.accounting.store.read().ledger
        except LedgerStoreError as error:
            result.errors.append(f"cannot read the ledger: {error}")
            return None
        try:
            groups = self._artifacts(result)
        except ObjectStoreError as error:
            result.errors.append(f"cannot list the artifacts: {error}")
            return None
        by_name = {
            (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"]): obj
            for obj in owners
        }
        return _Found(owners=owners, by_name=by_name, publishing=publishing, before=before, groups=groups)

    def _account_all(
        self, found: _Found, result: InventoryResult
    ) -> tuple[list[LedgerEntry], set[tuple[str, str]]]:
        """The ledger entry of every stored artifact that has its object, and (uid, digest) of each."""
        entries: list[LedgerEntry] = []
        seen: set[tuple[str, str]] = set()
        for location, infos in sorted(found.groups.items(), key=lambda item: item[0].prefix):
            try:
                entry = self._account(
                    location,
                    infos=infos,
                    by_name=found.by_name,
                    publishing=found.publishing,
                    result=result,
                    candidates=found.candidates,
                )
            except (ObjectStoreError, LedgerStoreError, OSError) as error:
                result.errors.append(f"{location.prefix}: {error}")
                continue
            if entry is not None:
                entries.append(entry)
                seen.add((entry.owner.uid, location.digest))
        return entries, seen

    def _write_ledger(
        self,
        found: _Found,
        entries: list[LedgerEntry],
        absences: tuple[Absence, ...],
        result: InventoryResult,
    ) -> None:
        """The ledger as counted, keeping the reservations of objects still publishing."""
        live = {
            _owner(obj).uid
            for obj in found.owners
            if (obj.get("status") or {}).get("phase") != ModelPhase.READY
        }
        keep = live | {uid for uid, _digest in found.publishing}

        def change(current: Ledger | None) -> Change:
            reserved = tuple(
                entry
                for entry in (current.entries if current is not None else ())
                if entry.state is EntryState.RESERVED and entry.owner.uid in keep
            )
            return Change(Ledger(entries=(*entries, *reserved), confirmed=result.clean, absences=absences))

        try:
            self.accounting.store.update(change)
        except LedgerStoreError as error:
            result.errors.append(str(error))

    def _remove_due(self, decision: orphans.Decision, result: InventoryResult) -> set[tuple[str, str]]:
        removed: set[tuple[str, str]] = set()
        for item in decision.remove:
            try:
                objects = self.store.delete_prefix(item.prefix)
            except ObjectStoreError as error:
                result.errors.append(f"{item.prefix}: cannot remove it: {error}")
                continue
            removed.add((item.prefix, item.uid))
            result.removed.append(item.prefix)
            result.removed_bytes += item.size_bytes
            if self.metrics is not None:
                self.metrics.removed_artifacts.inc()
                self.metrics.removed_bytes.inc(item.size_bytes)
            log.warning(
                "inventory pass removed what no object owns",
                extra={**_described(item), "objects": objects},
            )
        return removed

    def _report(self, decision: orphans.Decision, result: InventoryResult) -> None:
        kept = decision.kept
        if self.metrics is not None:
            self.metrics.orphaned_artifacts.set(len(kept))
            self.metrics.orphaned_bytes.set(sum(item.size_bytes for item in kept))
            self.metrics.removal_blocked.set(1 if decision.blocked else 0)
        if decision.blocked:
            held = decision.held
            log.error(
                "inventory pass held back removals that would take most of the store at once",
                extra={
                    "held": [_described(item) for item in held[:20]],
                    "held_count": len(held),
                    "held_bytes": sum(item.size_bytes for item in held),
                    "max_removal_fraction": self.max_removal_fraction,
                },
            )
        for item in decision.waiting:
            log.info(
                "inventory pass found what no object owns; it waits for the grace period",
                extra={**_described(item), "grace_seconds": self.grace.total_seconds()},
            )

    def _publishing(self) -> set[tuple[str, str]]:
        """(owner uid, digest) of every publication Job still running."""
        return {
            (
                str(job["metadata"].get("labels", {}).get(OWNER_UID_LABEL, "")),
                str(job["metadata"].get("annotations", {}).get(ARTIFACT_DIGEST_ANNOTATION, "")),
            )
            for job in self.job_cache()
            if is_running(job)
        }

    def _artifacts(self, result: InventoryResult) -> dict[ArtifactLocation, list[ObjectInfo]]:
        groups: dict[ArtifactLocation, list[ObjectInfo]] = collections.defaultdict(list)
        for info in self.store.list(ARTIFACTS_ROOT):
            location = locate(info.key)
            if location is None:
                result.errors.append(
                    f"{info.key}: not where the artifact layout puts anything; remove it from the bucket"
                )
                continue
            groups[location].append(info)
        return groups

    def _account(
        self,
        location: ArtifactLocation,
        *,
        infos: list[ObjectInfo],
        by_name: Mapping[tuple[str, str, str], Mapping[str, Any]],
        publishing: set[tuple[str, str]],
        result: InventoryResult,
        candidates: list[orphans.Candidate],
    ) -> LedgerEntry | None:
        obj = by_name.get((location.kind.value, location.namespace, location.name))
        owner = _owner(obj) if obj is not None else None
        being_written = owner is not None and (owner.uid, location.digest) in publishing
        stored = {info.key: info for info in infos}
        size = sum(info.size for info in infos)

        def unowned(uid: str, why: str) -> None:
            if not being_written:
                candidates.append(_candidate(location, uid=uid, size=size, why=why))

        manifest_info = stored.get(location.prefix + MANIFEST_NAME)
        if manifest_info is None:
            # A running publication's files are covered by its reservation.
            unowned("", "files without a manifest and no publication writing them")
            return None
        try:
            manifest, problem = self._manifest(manifest_info.key)
        except ObjectNotFound:
            return None  # removed since the listing, by the reconciler
        if obj is None or owner is None or (manifest is not None and manifest.owner.uid != owner.uid):
            unowned(
                manifest.owner.uid if manifest is not None else "",
                "its object no longer exists (by name and UID)",
            )
            return None
        served = _ready_digest(obj)
        if served and served != location.digest and not being_written:
            unowned(owner.uid, "superseded by a newer artifact of the same object")
            return None
        if manifest is not None:
            problem = _damage(manifest.files, location, stored)
        if problem and served == location.digest:
            result.damaged.append((ModelKey(location.kind, location.namespace, location.name), problem))
        result.artifacts += 1
        result.stored_bytes += size
        return LedgerEntry(
            owner=owner, scope=scope_of(owner.kind), size_bytes=size, state=EntryState.PUBLISHED
        )

    def _manifest(self, key: str) -> tuple[ArtifactManifest | None, str]:
        """The stored manifest, or None and why it cannot be read; `ObjectNotFound` when it is gone."""
        try:
            return manifest_from_json(self.store.get_bytes(key)), ""
        except ManifestFormatError as error:
            return None, f"manifest unreadable ({error})"

    def _missing_artifacts(
        self, owners: Iterable[Mapping[str, Any]], seen: set[tuple[str, str]], result: InventoryResult
    ) -> None:
        for obj in owners:
            status = obj.get("status") or {}
            digest = (status.get("artifact") or {}).get("digest")
            if status.get("phase") == ModelPhase.READY and digest and (_owner(obj).uid, digest) not in seen:
                meta = obj["metadata"]
                key = ModelKey(ModelKind(obj["kind"]), meta.get("namespace") or "", meta["name"])
                result.damaged.append((key, "the artifact is missing from the object store"))

    def _uploads(
        self,
        by_name: Mapping[tuple[str, str, str], Mapping[str, Any]],
        publishing: set[tuple[str, str]],
        result: InventoryResult,
        candidates: list[orphans.Candidate],
    ) -> int:
        """Staged uploads whose object is gone or already published become candidates; returns
        the bytes staged in all."""
        try:
            prefixes: dict[str, int] = collections.defaultdict(int)
            for info in self.store.list(UPLOADS_ROOT):
                parts = info.key.split("/")
                if len(parts) >= 6:
                    prefixes["/".join(parts[:5]) + "/"] += info.size
        except ObjectStoreError as error:
            result.errors.append(f"cannot list the staged uploads: {error}")
            return 0
        live = {
            _owner(obj).uid
            for obj in by_name.values()
            if (obj.get("status") or {}).get("phase") != ModelPhase.READY
        } | {uid for uid, _ in publishing}
        for prefix, size in sorted(prefixes.items()):
            _root, _scope, namespace, name, uid = prefix.rstrip("/").split("/")
            if uid not in live:
                cluster = namespace == CLUSTER_NAMESPACE_SEGMENT
                kind = ModelKind.CLUSTER_MODEL if cluster else ModelKind.MODEL
                owner = Owner(kind=kind.value, namespace="" if cluster else namespace, name=name, uid=uid)
                candidates.append(
                    orphans.Candidate(
                        prefix=prefix,
                        uid=uid,
                        size_bytes=size,
                        why="an upload nobody will publish",
                        owner=owner,
                        accounted=False,
                    )
                )
        return sum(prefixes.values())


def _described(item: orphans.Candidate) -> dict[str, Any]:
    """What a log line says about a removal: the object, its UID, the digest, the bytes, why."""
    owner = item.owner
    where = (
        f"{owner.kind} {owner.namespace}/{owner.name}" if owner.namespace else f"{owner.kind} {owner.name}"
    )
    return {
        "object": where,
        "uid": item.uid,
        "digest": item.digest,
        "bytes": item.size_bytes,
        "prefix": item.prefix,
        "why": item.why,
    }


def _damage(files: Iterable[Any], location: ArtifactLocation, stored: Mapping[str, ObjectInfo]) -> str:
    """What is wrong with an artifact's files, or "" when each is there as it was written."""
    problems = []
    for item in files:
        info = stored.get(location.prefix + FILES_DIR + item.path)
        if info is None:
            problems.append(f"{item.path} is missing")
        elif info.size != item.size:
            problems.append(f"{item.path} has {info.size} bytes, {item.size} were published")
        elif item.etag and info.etag and item.etag != info.etag:
            problems.append(f"{item.path} was replaced after publication")
    return "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
