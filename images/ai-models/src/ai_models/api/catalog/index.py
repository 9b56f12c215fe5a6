"""The replica's local catalog index: SQLite (stdlib) in WAL mode with FTS5 for text search.

A source is replaced in one write transaction (delete its rows, insert the new generation, record
the generation): in WAL mode readers keep their snapshot until the commit, so they see either the
old generation or the new one, never a mix, and never wait for the writer. Pages are served from
the stored records' JSON (plus the verdict), so a page costs no per-entry model building. Tables
and keys: `index_schema`; the search statement: `index_query`.

The file is a cache rebuilt from the object store at every start, in a private temporary
directory or the one given (the pod's emptyDir). One writer connection (the builder thread) and a
small pool of reader connections bound memory: each connection's page cache is capped, and
requests beyond the pool wait for a reader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import queue
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from ai_models.api.catalog.index_query import Filters, search_statement
from ai_models.api.catalog.index_schema import (
    DELETE_SOURCE,
    FILL_TEXT,
    PROVIDERS,
    SCHEMA,
    UPSERT,
    VERDICT_FUNCTION,
    record_row,
)
from ai_models.api.models import SearchSort
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from ai_models.names import MODULE, CatalogProvider

log = logging.getLogger(__name__)

DATABASE_NAME: Final = "catalog-index.sqlite3"


class IndexingStopped(Exception):
    """The builder was asked to stop in the middle of a source; its transaction was rolled back."""


@dataclasses.dataclass(frozen=True)
class SourceRow:
    name: str
    provider: CatalogProvider | None
    generation: str
    models: int
    completed_at: datetime.datetime


@dataclasses.dataclass(frozen=True)
class Row:
    """One search hit: the stored record's JSON and what the page assembly needs besides."""

    source: str
    id: str
    key: int
    weights_bytes: int | None
    document: str


def _connect(path: Path, *, cache_kib: int) -> sqlite3.Connection:
    # check_same_thread=False: pooled connections move between request threads (one at a time).
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    # The index is rebuilt from the object store at every start, so durability buys nothing.
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute(f"PRAGMA cache_size = -{max(cache_kib, 256)}")
    connection.execute("PRAGMA temp_store = FILE")
    return connection


class CatalogIndex:
    def __init__(
        self, *, directory: Path | None = None, readers: int = 4, cache_kib_per_connection: int = 8192
    ) -> None:
        self._owned_directory = directory is None
        self.directory = directory or Path(tempfile.mkdtemp(prefix=f"{MODULE}-catalog-index-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / DATABASE_NAME
        # A container restarted in the same pod finds its previous index in the emptyDir; it is a
        # cache of the object store, so it starts over rather than trusting a file left mid-write.
        self._remove_files()
        self._writer = _connect(self.path, cache_kib=cache_kib_per_connection)
        self._writer_lock = threading.Lock()
        self._writer.executescript(SCHEMA)
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        for _ in range(readers):
            reader = _connect(self.path, cache_kib=cache_kib_per_connection)
            reader.execute("PRAGMA query_only = ON")
            self._readers.put(reader)
            self._all_readers.append(reader)
        self._closed = False

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise RuntimeError(f"the catalog index {self.path} is closed")
        connection = self._readers.get()
        try:
            yield connection
        finally:
            self._readers.put(connection)

    # -- writing (the builder thread) ---------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer, committed whole or rolled back whole."""
        with self._writer_lock:
            writer = self._writer
            writer.execute("BEGIN IMMEDIATE")
            try:
                yield writer
                writer.execute("COMMIT")
            except BaseException:
                writer.execute("ROLLBACK")
                raise
            # Fresh statistics keep the planner choosing the selective index per filter; the
            # checkpoint returns the write-ahead log's space once readers have moved on.
            writer.execute("ANALYZE")
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def replace_source(
        self,
        manifest: CatalogManifest,
        records: Iterable[CatalogRecord],
        *,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> SourceRow:
        """Serve `manifest`'s generation of its source instead of whatever was served before.

        Records of another source or of a provider the contract does not know are skipped (the
        count is logged). Raises IndexingStopped, changing nothing, once `should_stop()` is true.
        """
        source = manifest.source
        skipped: list[str] = []
        provider: CatalogProvider | None = None
        with self._transaction() as writer:
            for statement in DELETE_SOURCE:
                writer.execute(statement, (source,))
            for record in records:
                if should_stop():
                    raise IndexingStopped(source)
                if record.source != source or record.provider not in PROVIDERS:
                    skipped.append(record.id)
                    continue
                provider = provider or CatalogProvider(record.provider)
                (rowid,) = writer.execute(UPSERT, record_row(record)).fetchone()
                writer.execute("INSERT OR REPLACE INTO documents VALUES (?, ?)", (rowid, record.to_json()))
            writer.execute(FILL_TEXT, (source,))
            (models,) = writer.execute("SELECT count(*) FROM entries WHERE source = ?", (source,)).fetchone()
            row = SourceRow(
                name=source,
                provider=provider,
                generation=manifest.generation,
                models=models,
                completed_at=manifest.completed_at,
            )
            writer.execute(
                "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?)",
                (source, provider, row.generation, models, row.completed_at.isoformat()),
            )
        if skipped:
            log.warning(
                "catalog records skipped: they name another source or a provider the API does not serve",
                extra={"source": source, "generation": manifest.generation, "skipped": len(skipped),
                       "first_skipped_id": skipped[0]},
            )  # fmt: skip
        return row

    def remove_source(self, source: str) -> None:
        with self._transaction() as writer:
            for statement in DELETE_SOURCE:
                writer.execute(statement, (source,))
            writer.execute("DELETE FROM sources WHERE name = ?", (source,))

    # -- reading (request threads) ------------------------------------------------------------

    def sources(self) -> list[SourceRow]:
        with self._reader() as reader:
            found = reader.execute(
                "SELECT name, provider, generation, models, completed_at FROM sources ORDER BY name"
            ).fetchall()
        return [
            SourceRow(
                name=name,
                provider=CatalogProvider(provider) if provider else None,
                generation=generation,
                models=models,
                completed_at=datetime.datetime.fromisoformat(completed_at),
            )
            for name, provider, generation, models, completed_at in found
        ]

    def generations(self) -> dict[str, str]:
        """Served generation per source."""
        with self._reader() as reader:
            return dict(reader.execute("SELECT name, generation FROM sources").fetchall())

    def entry(self, source: str, model_id: str) -> tuple[int | None, str] | None:
        """(weights bytes, stored JSON) of one entry, or None."""
        with self._reader() as reader:
            found = reader.execute(
                "SELECT e.weights_bytes, d.document FROM entries AS e "
                "JOIN documents AS d ON d.rowid = e.rowid WHERE e.source = ? AND e.id = ?",
                (source, model_id),
            ).fetchone()
        return (found[0], found[1]) if found is not None else None

    def search(
        self,
        filters: Filters,
        *,
        sort: SearchSort,
        after: tuple[int, str, str] | None,
        limit: int,
        verdict_of: Callable[[int | None], str],
    ) -> list[Row]:
        """Up to `limit` hits in (sort key, source, id) order, starting after the `after` cursor.

        `verdict_of` is registered as the SQLite function behind the verdict filter: the filter runs
        the very function the served verdicts come from.
        """
        if filters.empty():
            return []
        sql, params = search_statement(filters, sort=sort, after=after, limit=limit)
        with self._reader() as reader:
            reader.create_function(VERDICT_FUNCTION, 1, verdict_of, deterministic=True)
            found = reader.execute(sql, params).fetchall()
        return [Row(source=s, id=i, key=k, weights_bytes=w, document=d) for s, i, k, w, d in found]

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)

    def close(self, *, writer_timeout: float = 5.0) -> None:
        """Close every connection and remove the files.

        A builder stuck in a store read holds the writer; after `writer_timeout` the writer is
        left to the process exit instead of blocking the shutdown.
        """
        if self._closed:
            return
        self._closed = True
        if self._writer_lock.acquire(timeout=writer_timeout):
            try:
                self._writer.close()
            finally:
                self._writer_lock.release()
        else:
            log.warning("the catalog index writer is busy; leaving it to the process exit")
        for reader in self._all_readers:
            reader.close()
        if self._owned_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
        else:
            self._remove_files()
