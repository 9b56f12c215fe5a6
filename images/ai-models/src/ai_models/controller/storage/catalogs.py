"""Catalog indexes whose ModelCatalogSource is gone: the inventory pass stops serving them, then removes them.

A source deleted while the controller runs is cleaned up by its finalizer. One deleted while no
controller ran (its finalizer removed by hand, the module disabled, a cluster restored without
its sources) leaves `catalog/<source>/` behind, and every api replica would serve it forever.
Each pass of the inventory therefore looks at every prefix under `catalog/`:

- no source of that name in the list, and a GET of the name answers 404 (two observations: a
  list can come back short by mistake, a GET of one name cannot): the manifest is set aside
  (`withdrawn-manifest.json`), so every api replica stops serving the source within its poll
  interval; nothing is lost yet, and the absence is recorded in the ledger like an artifact's;
- still absent, and confirmed again, once the absence is `grace` old (and never in the pass that
  first saw it, `domain.storage.orphans`): the whole prefix is removed;
- the source exists again before that (re-created, or restored after the bucket): the set-aside
  manifest is put back, unless a pass of the source has written a newer one meanwhile.

Unlike artifacts, catalog removals have no mass-removal guard: each one is confirmed by its own
GET, which is what the guard stands in for when only a list is known, and an index is rebuilt
by the source's next pass, while an artifact may be the only copy of an upload.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Iterable
from typing import Protocol

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.resources import MODEL_CATALOG_SOURCES
from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, ObjectStoreError
from ai_models.catalog.layout import CATALOG_PREFIX, manifest_key, source_prefix, withdrawn_manifest_key
from ai_models.domain.storage import orphans
from ai_models.domain.storage.ledger import Absence, Owner

log = logging.getLogger(__name__)

WHY = "its ModelCatalogSource no longer exists"
# Failures of one observation: the store, the API server's answer, or no answer at all.
_FAILURES = (ObjectStoreError, KubeError)


class SourceDirectory(Protocol):
    """The ModelCatalogSources the API server has (`adapters.kube.catalog_sources`)."""

    def names(self) -> set[str]: ...

    def exists(self, name: str) -> bool: ...


@dataclasses.dataclass
class CatalogSweepResult:
    errors: list[str] = dataclasses.field(default_factory=list)
    withdrawn: list[str] = dataclasses.field(default_factory=list)  # sources no longer served
    restored: list[str] = dataclasses.field(default_factory=list)  # sources served again
    waiting: list[str] = dataclasses.field(default_factory=list)  # withdrawn, within the grace period
    removed: list[str] = dataclasses.field(default_factory=list)  # prefixes
    removed_bytes: int = 0
    absences: tuple[Absence, ...] = ()  # to record in the ledger for the next pass


@dataclasses.dataclass
class CatalogSweep:
    store: ObjectStore
    sources: SourceDirectory
    grace: datetime.timedelta

    def run(self, *, absences: Iterable[Absence], now: datetime.datetime) -> CatalogSweepResult:
        """One look at `catalog/`; `absences` are the ledger's, of which only catalog ones matter."""
        before = tuple(item for item in absences if item.prefix.startswith(CATALOG_PREFIX))
        # Whatever cannot be observed keeps the wait it had: a failing list does not restart it.
        result = CatalogSweepResult(absences=before)
        try:
            owned = self.sources.names()
        except _FAILURES as error:
            result.errors.append(f"cannot list the ModelCatalogSources: {error}")
            return result
        try:
            prefixes = self.store.list_prefixes(CATALOG_PREFIX)
        except ObjectStoreError as error:
            result.errors.append(f"cannot list the catalog indexes under {CATALOG_PREFIX}: {error}")
            return result
        candidates: list[orphans.Candidate] = []
        unobserved: list[Absence] = []
        for prefix in prefixes:
            name = prefix.removeprefix(CATALOG_PREFIX).rstrip("/")
            try:
                if name in owned or self.sources.exists(name):
                    self._restore(name, result)
                    continue
                size = sum(info.size for info in self.store.list(prefix))
                self._withdraw(name, result)
            except _FAILURES as error:
                result.errors.append(f"{prefix}: {error}")
                unobserved += [item for item in before if item.prefix == prefix]
                continue
            owner = Owner(kind=MODEL_CATALOG_SOURCES.kind, namespace="", name=name, uid="")
            candidates.append(
                orphans.Candidate(
                    prefix=prefix, uid="", size_bytes=size, why=WHY, owner=owner, accounted=False
                )
            )
        decision = orphans.decide(
            candidates,
            absences=before,
            now=now,
            grace=self.grace,
            stored_bytes=sum(item.size_bytes for item in candidates),
            max_fraction=1.0,  # no guard: see the module's docstring
        )
        removed = {item.prefix for item in decision.remove if self._remove(item, result)}
        result.waiting = [item.owner.name for item in decision.waiting]
        for item in decision.waiting:
            log.info(
                "catalog index of a deleted ModelCatalogSource waits for the grace period",
                extra={"source": item.owner.name, "prefix": item.prefix, "bytes": item.size_bytes,
                       "grace_seconds": self.grace.total_seconds()},
            )  # fmt: skip
        result.absences = (
            *(item for item in decision.absences if item.prefix not in removed),
            *unobserved,
        )
        return result

    def _withdraw(self, name: str, result: CatalogSweepResult) -> None:
        """The manifest set aside: readers drop the source at their next poll, and it can return."""
        key = manifest_key(name)
        try:
            data = self.store.get_bytes(key)
        except ObjectNotFound:
            return  # withdrawn by an earlier pass, or never completed a pass
        self.store.put_bytes(withdrawn_manifest_key(name), data)
        self.store.delete(key)
        result.withdrawn.append(name)
        log.warning(
            "catalog index withdrawn: its ModelCatalogSource no longer exists",
            extra={
                "source": name,
                "prefix": source_prefix(name),
                "grace_seconds": self.grace.total_seconds(),
            },
        )

    def _restore(self, name: str, result: CatalogSweepResult) -> None:
        withdrawn = withdrawn_manifest_key(name)
        try:
            data = self.store.get_bytes(withdrawn)
        except ObjectNotFound:
            return
        # Conditional: a pass of the returned source may have served a newer generation already.
        if self.store.put_bytes_if_absent(manifest_key(name), data) is not None:
            result.restored.append(name)
            log.info(
                "catalog index served again: its ModelCatalogSource exists again", extra={"source": name}
            )
        self.store.delete(withdrawn)

    def _remove(self, item: orphans.Candidate, result: CatalogSweepResult) -> bool:
        name = item.owner.name
        try:
            # Readers drop a source once its manifest is gone; gone first, they never read a
            # manifest whose chunks are half removed.
            self.store.delete(manifest_key(name))
            objects = self.store.delete_prefix(item.prefix)
        except ObjectStoreError as error:
            result.errors.append(f"{item.prefix}: cannot remove it: {error}")
            return False
        result.removed.append(item.prefix)
        result.removed_bytes += item.size_bytes
        log.warning(
            "inventory pass removed the catalog index of a deleted ModelCatalogSource",
            extra={"source": name, "prefix": item.prefix, "objects": objects, "bytes": item.size_bytes,
                   "why": item.why},
        )  # fmt: skip
        return True
