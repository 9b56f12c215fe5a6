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
from ai_models.controller.models.jobs import DIGEST_ANNOTATION, is_running
from ai_models.controller.storage.accounting import Accounting
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
from ai_models.domain.artifacts.manifest import ManifestFormatError, manifest_from_json
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage import orphans
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner
from ai_models.names import OWNER_UID_LABEL, ModelKind, ModelPhase

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
            try:
                owners = [obj for kind in ModelKind for obj in self.objects.list_all(kind)]
            except Exception as error:
                result.errors.append(f"cannot list Models and ClusterModels: {error}")
                return result
            by_name = {
                (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"]): obj
                for obj in owners
            }
            publishing = self._publishing()
            try:
                # What earlier passes found unowned, and since when; without a readable ledger
                # every wait starts now (a restart that lost the ledger removes nothing early).
                before = self.accounting.store.read().ledger
            except LedgerStoreError as error:
                result.errors.append(f"cannot read the ledger: {error}")
                return result
            try:
                groups = self._artifacts(result)
            except ObjectStoreError as error:
                result.errors.append(f"cannot list the artifacts: {error}")
                return result
            entries: list[LedgerEntry] = []
            candidates: list[orphans.Candidate] = []
            seen: set[tuple[str, str]] = set()
            for location, infos in sorted(groups.items(), key=lambda item: item[0].prefix):
                try:
                    entry = self._account(
                        location,
                        infos=infos,
                        by_name=by_name,
                        publishing=publishing,
                        result=result,
                        candidates=candidates,
                    )
                except (ObjectStoreError, LedgerStoreError, OSError) as error:
                    result.errors.append(f"{location.prefix}: {error}")
                    continue
                if entry is not None:
                    entries.append(entry)
                    seen.add((entry.owner.uid, location.digest))
            self._missing_artifacts(owners, seen, result)
            upload_bytes = self._uploads(by_name, publishing, result, candidates)
            decision = orphans.decide(
                candidates,
                absences=before.absences if before is not None else (),
                now=self.clock(),
                grace=self.grace,
                stored_bytes=sum(info.size for infos in groups.values() for info in infos) + upload_bytes,
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
            live = {
                _owner(obj).uid
                for obj in owners
                if (obj.get("status") or {}).get("phase") != ModelPhase.READY
            }
            keep = live | {uid for uid, _digest in publishing}

            def change(current: Ledger | None) -> Change:
                reserved = tuple(
                    entry
                    for entry in (current.entries if current is not None else ())
                    if entry.state is EntryState.RESERVED and entry.owner.uid in keep
                )
                return Change(
                    Ledger(entries=(*entries, *reserved), confirmed=result.clean, absences=absences)
                )

            try:
                self.accounting.store.update(change)
            except LedgerStoreError as error:
                result.errors.append(str(error))
            return result

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
                str(job["metadata"].get("annotations", {}).get(DIGEST_ANNOTATION, "")),
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
            path_owner = Owner(
                kind=location.kind.value, namespace=location.namespace, name=location.name, uid=uid
            )
            candidates.append(
                orphans.Candidate(
                    prefix=location.prefix,
                    uid=uid,
                    size_bytes=size,
                    why=why,
                    owner=path_owner,
                    digest=location.digest,
                )
            )

        manifest_info = stored.get(location.prefix + MANIFEST_NAME)
        if manifest_info is None:
            if not being_written:
                unowned("", "files without a manifest and no publication writing them")
            return None  # a running publication's files are covered by its reservation
        try:
            manifest = manifest_from_json(self.store.get_bytes(manifest_info.key))
        except ObjectNotFound:
            return None  # removed since the listing, by the reconciler
        except ManifestFormatError as error:
            manifest = None
            problem = f"manifest unreadable ({error})"
        written_for = manifest.owner.uid if manifest is not None else ""
        if obj is None or owner is None or (manifest is not None and manifest.owner.uid != owner.uid):
            if not being_written:
                unowned(written_for, "its object no longer exists (by name and UID)")
            return None
        status = obj.get("status") or {}
        served = (status.get("artifact") or {}).get("digest")
        ready = status.get("phase") == ModelPhase.READY
        if ready and served and served != location.digest and not being_written:
            unowned(owner.uid, "superseded by a newer artifact of the same object")
            return None
        if manifest is not None:
            problem = _damage(manifest.files, location, stored)
        if problem and ready and served == location.digest:
            result.damaged.append((ModelKey(location.kind, location.namespace, location.name), problem))
        result.artifacts += 1
        result.stored_bytes += size
        return LedgerEntry(
            owner=owner, scope=scope_of(owner.kind), size_bytes=size, state=EntryState.PUBLISHED
        )

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
