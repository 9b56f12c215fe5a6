"""The inventory pass: what the object store really holds becomes the ledger's published entries.

It lists every artifact, matches each to its object, checks each manifest's files (present, same
size, same store version token), and rebuilds the ledger: one published entry per artifact of a
live object, sized by the bytes actually stored; reservations survive only for objects that are
still being published. Orphans (an object gone, or a superseded digest, or files a dead Job left
without a manifest) are deleted. Every problem is collected instead of stopping the pass; only a
pass without any marks the ledger confirmed. Damaged artifacts of Ready objects are handed to the
reconciler to be published again.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ai_models.adapters.kube.ledger_store import Change, LedgerStoreError
from ai_models.adapters.objectstore import ObjectInfo, ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.controller.models.jobs import DIGEST_ANNOTATION, is_running
from ai_models.controller.models.kube import ModelKey, ModelObjects
from ai_models.controller.storage.accounting import Accounting
from ai_models.domain.artifacts.layout import (
    ARTIFACTS_ROOT,
    FILES_DIR,
    MANIFEST_NAME,
    UPLOADS_ROOT,
    ArtifactLocation,
    locate,
    scope_of,
)
from ai_models.domain.artifacts.manifest import ManifestFormatError, manifest_from_json
from ai_models.domain.storage.ledger import EntryState, Ledger, LedgerEntry, Owner
from ai_models.names import OWNER_UID_LABEL, ModelKind, ModelPhase

log = logging.getLogger(__name__)


@dataclasses.dataclass
class InventoryResult:
    errors: list[str] = dataclasses.field(default_factory=list)
    artifacts: int = 0
    stored_bytes: int = 0
    removed: list[str] = dataclasses.field(default_factory=list)
    damaged: list[tuple[ModelKey, str]] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.errors


def _owner(obj: Mapping[str, Any]) -> Owner:
    meta = obj["metadata"]
    return Owner(kind=obj["kind"], namespace=meta.get("namespace") or "", name=meta["name"], uid=meta["uid"])


@dataclasses.dataclass
class InventoryPass:
    store: ObjectStore
    objects: ModelObjects
    accounting: Accounting
    job_cache: Callable[[], list[dict[str, Any]]]

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
                groups = self._artifacts(result)
            except ObjectStoreError as error:
                result.errors.append(f"cannot list the artifacts: {error}")
                return result
            entries: list[LedgerEntry] = []
            seen: set[tuple[str, str]] = set()
            for location, infos in sorted(groups.items(), key=lambda item: item[0].prefix):
                try:
                    entry = self._account(location, infos, by_name, publishing, result)
                except (ObjectStoreError, LedgerStoreError, OSError) as error:
                    result.errors.append(f"{location.prefix}: {error}")
                    continue
                if entry is not None:
                    entries.append(entry)
                    seen.add((entry.owner.uid, location.digest))
            self._missing_artifacts(owners, seen, result)
            self._uploads(by_name, publishing, result)
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
                return Change(Ledger(entries=(*entries, *reserved), confirmed=result.clean))

            try:
                self.accounting.store.update(change)
            except LedgerStoreError as error:
                result.errors.append(str(error))
            return result

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

    def _remove(self, prefix: str, why: str, result: InventoryResult) -> None:
        removed = self.store.delete_prefix(prefix)
        result.removed.append(prefix)
        log.info("removed from the object store", extra={"prefix": prefix, "objects": removed, "why": why})

    def _account(
        self,
        location: ArtifactLocation,
        infos: list[ObjectInfo],
        by_name: Mapping[tuple[str, str, str], Mapping[str, Any]],
        publishing: set[tuple[str, str]],
        result: InventoryResult,
    ) -> LedgerEntry | None:
        obj = by_name.get((location.kind.value, location.namespace, location.name))
        owner = _owner(obj) if obj is not None else None
        being_written = owner is not None and (owner.uid, location.digest) in publishing
        stored = {info.key: info for info in infos}
        manifest_info = stored.get(location.prefix + MANIFEST_NAME)
        if manifest_info is None:
            if not being_written:
                self._remove(
                    location.prefix, "files without a manifest and no publication writing them", result
                )
            return None  # a running publication's files are covered by its reservation
        try:
            manifest = manifest_from_json(self.store.get_bytes(manifest_info.key))
        except ObjectNotFound:
            return None  # removed since the listing, by the reconciler
        except ManifestFormatError as error:
            manifest = None
            problem = f"manifest unreadable ({error})"
        if obj is None or owner is None or (manifest is not None and manifest.owner.uid != owner.uid):
            if not being_written:
                self._remove(location.prefix, "its object no longer exists", result)
            return None
        status = obj.get("status") or {}
        served = (status.get("artifact") or {}).get("digest")
        ready = status.get("phase") == ModelPhase.READY
        if ready and served and served != location.digest and not being_written:
            self._remove(location.prefix, "superseded by a newer artifact of the same object", result)
            return None
        if manifest is not None:
            problem = _damage(manifest.files, location, stored)
        if problem and ready and served == location.digest:
            result.damaged.append((ModelKey(location.kind, location.namespace, location.name), problem))
        size = sum(info.size for info in infos)
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
    ) -> None:
        """Remove staged uploads whose object is gone or already published."""
        try:
            prefixes: set[str] = set()
            for info in self.store.list(UPLOADS_ROOT):
                parts = info.key.split("/")
                if len(parts) >= 6:
                    prefixes.add("/".join(parts[:5]) + "/")
            live = {
                _owner(obj).uid
                for obj in by_name.values()
                if (obj.get("status") or {}).get("phase") != ModelPhase.READY
            } | {uid for uid, _ in publishing}
            for prefix in sorted(prefixes):
                uid = prefix.rstrip("/").rsplit("/", 1)[-1]
                if uid not in live:
                    self._remove(prefix, "an upload nobody will publish", result)
        except ObjectStoreError as error:
            result.errors.append(f"cannot clean up staged uploads: {error}")


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
