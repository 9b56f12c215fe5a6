"""The replica's local catalog index: SQLite (stdlib) in WAL mode with FTS5 for text search.

One narrow row per (source, id) in `entries` holds the filter columns and sort keys; the stored
record's JSON sits apart in `documents` under the same rowid and is read only for the entries of
the page, then served as is (plus the verdict), so a page costs no per-entry model building and a
scan touches a few MB, not the documents. A source is replaced in one write transaction (delete its
rows, insert the new generation, record the generation): in WAL mode readers keep their snapshot
until the commit, so they see either the old generation or the new one, never a mix, and never wait
for the writer.

Sort keys are stored negated (absent = 1, after every present value) so every sort is ascending
on (key, source, id): keyset pagination is then a single row-value comparison that an index on
exactly those columns answers without sorting. Range filters are written on the same keys, so the
index of a sorted fact also serves a range on it.

The file lives in a private temporary directory: it is a cache rebuilt from the object store at
every start. One writer connection (the builder thread) and a small pool of reader connections
bound memory: each connection's page cache is capped, and requests beyond the pool wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import queue
import re
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from ai_models.api.models import SearchSort
from ai_models.catalog.layout import CatalogManifest
from ai_models.domain.catalog.record import CatalogRecord
from ai_models.names import CatalogProvider

log = logging.getLogger(__name__)

DATABASE_NAME: Final = "catalog-index.sqlite3"
VERDICT_FUNCTION: Final = "ai_models_download_verdict"
ABSENT_KEY: Final = 1
SORT_COLUMNS: Final = {
    SearchSort.DOWNLOADS: "k_downloads",
    SearchSort.LIKES: "k_likes",
    SearchSort.LAST_MODIFIED: "k_last_modified",
    SearchSort.CREATED_AT: "k_created_at",
    SearchSort.PARAMETER_COUNT: "k_parameter_count",
    SearchSort.WEIGHTS_BYTES: "k_weights_bytes",
}
_PROVIDERS: Final = frozenset(provider.value for provider in CatalogProvider)
# FTS5's unicode61 tokenizer keeps letters and digits and splits on everything else (`_` too).
_WORD = re.compile(r"[^\W_]+")

# One per sort, in page order; `weights_bytes` rides along so the verdict filter needs no row fetch.
_SORT_INDEXES = "".join(
    f"CREATE INDEX entries_{column} ON entries ({column}, source, id, weights_bytes);"
    for column in SORT_COLUMNS.values()
)
_SCHEMA = f"""
CREATE TABLE entries (
    source TEXT NOT NULL,
    id TEXT NOT NULL,
    author TEXT COLLATE NOCASE,
    pipeline_tag TEXT COLLATE NOCASE,
    library TEXT COLLATE NOCASE,
    weights_bytes INTEGER,
    {", ".join(f"{column} INTEGER NOT NULL" for column in SORT_COLUMNS.values())},
    UNIQUE (source, id)
);
{_SORT_INDEXES}
CREATE INDEX entries_author ON entries (author);
CREATE INDEX entries_pipeline_tag ON entries (pipeline_tag);
CREATE INDEX entries_library ON entries (library);
CREATE TABLE documents (rowid INTEGER PRIMARY KEY, document TEXT NOT NULL);
CREATE VIRTUAL TABLE entries_text USING fts5(
    id, author, tags, pipeline_tag, library, architecture, family,
    tokenize = 'unicode61', prefix = '2 3'
);
CREATE TABLE sources (
    name TEXT PRIMARY KEY,
    provider TEXT,
    generation TEXT NOT NULL,
    models INTEGER NOT NULL,
    completed_at TEXT NOT NULL
);
"""

# Where an id repeats, the later record wins and keeps the row (and so its rowid).
_UPSERT = f"""
INSERT INTO entries (source, id, author, pipeline_tag, library, weights_bytes,
                     {", ".join(SORT_COLUMNS.values())})
VALUES ({", ".join("?" * (6 + len(SORT_COLUMNS)))})
ON CONFLICT (source, id) DO UPDATE SET
    author = excluded.author, pipeline_tag = excluded.pipeline_tag, library = excluded.library,
    weights_bytes = excluded.weights_bytes,
    {", ".join(f"{c} = excluded.{c}" for c in SORT_COLUMNS.values())}
RETURNING rowid
"""

# The text columns come from the stored documents in one statement once the rows are in, which
# is much faster than one FTS insert per record from Python.
_FILL_TEXT = """
INSERT INTO entries_text (rowid, id, author, tags, pipeline_tag, library, architecture, family)
SELECT e.rowid, e.id, e.author,
       (SELECT group_concat(value, ' ') FROM json_each(d.document, '$.metadata.tags')),
       e.pipeline_tag, e.library,
       json_extract(d.document, '$.resources.architecture'), json_extract(d.document, '$.resources.family')
FROM entries AS e JOIN documents AS d ON d.rowid = e.rowid
WHERE e.source = ?
"""

_DELETE_SOURCE = (
    "DELETE FROM entries_text WHERE rowid IN (SELECT rowid FROM entries WHERE source = ?)",
    "DELETE FROM documents WHERE rowid IN (SELECT rowid FROM entries WHERE source = ?)",
    "DELETE FROM entries WHERE source = ?",
)


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
class Filters:
    """What a search selects; None means no condition. Ranges exclude entries lacking the fact."""

    text_terms: tuple[str, ...] = ()
    source: str | None = None
    pipeline_tag: str | None = None
    library: str | None = None
    author: str | None = None
    min_parameters: int | None = None
    max_parameters: int | None = None
    max_weights_bytes: int | None = None
    verdict: str | None = None


@dataclasses.dataclass(frozen=True)
class Row:
    """One search hit: the stored record's JSON and what the page assembly needs besides."""

    source: str
    id: str
    key: int
    weights_bytes: int | None
    document: str


def text_terms(q: str | None) -> tuple[str, ...]:
    """The words of `q` as the index matches them (lower-cased; punctuation separates)."""
    return tuple(word.lower() for word in _WORD.findall(q or ""))


def _match_expression(terms: tuple[str, ...]) -> str:
    # Quoted, so no word is read as FTS syntax (AND, NEAR, column filters); `*` makes each a prefix.
    return " AND ".join(f'"{term}"*' for term in terms)


def _sort_key(value: int | None) -> int:
    return -value if value is not None else ABSENT_KEY


def _timestamp_key(value: datetime.datetime | None) -> int:
    if value is None:
        return ABSENT_KEY
    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    return -int(aware.timestamp() * 1_000_000)


def _row(record: CatalogRecord) -> tuple[object, ...]:
    meta, facts = record.metadata, record.resources
    return (
        record.source,
        record.id,
        meta.author,
        meta.pipeline_tag,
        meta.library_name,
        facts.weights_bytes,
        _sort_key(meta.downloads),
        _sort_key(meta.likes),
        _timestamp_key(meta.last_modified),
        _timestamp_key(meta.created_at),
        _sort_key(facts.parameter_count),
        _sort_key(facts.weights_bytes),
    )


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
        self.directory = directory or Path(tempfile.mkdtemp(prefix="ai-models-catalog-index-"))
        self.path = self.directory / DATABASE_NAME
        self._cache_kib = cache_kib_per_connection
        self._writer = _connect(self.path, cache_kib=cache_kib_per_connection)
        self._writer_lock = threading.Lock()
        self._writer.executescript(_SCHEMA)
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

    def replace_source(
        self,
        manifest: CatalogManifest,
        records: Iterable[CatalogRecord],
        *,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> SourceRow:
        """Serve `manifest`'s generation of its source instead of whatever was served before.

        Records of another source or of a provider the contract does not know are skipped with a
        warning. Raises IndexingStopped (nothing changed) when `should_stop()` turns true.
        """
        source = manifest.source
        skipped = 0
        provider: CatalogProvider | None = None

        def insert(writer: sqlite3.Connection) -> None:
            nonlocal skipped, provider
            for record in records:
                if should_stop():
                    raise IndexingStopped(source)
                if record.source != source or record.provider not in _PROVIDERS:
                    skipped += 1
                    log.warning(
                        "catalog record skipped: it names another source or an unknown provider",
                        extra={"source": source, "record_source": record.source, "id": record.id,
                               "provider": record.provider, "generation": manifest.generation},
                    )  # fmt: skip
                    continue
                provider = provider or CatalogProvider(record.provider)
                (rowid,) = writer.execute(_UPSERT, _row(record)).fetchone()
                writer.execute("INSERT OR REPLACE INTO documents VALUES (?, ?)", (rowid, record.to_json()))

        with self._writer_lock:
            writer = self._writer
            writer.execute("BEGIN IMMEDIATE")
            try:
                for statement in _DELETE_SOURCE:
                    writer.execute(statement, (source,))
                insert(writer)
                writer.execute(_FILL_TEXT, (source,))
                (models,) = writer.execute(
                    "SELECT count(*) FROM entries WHERE source = ?", (source,)
                ).fetchone()
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
                writer.execute("COMMIT")
            except BaseException:
                writer.execute("ROLLBACK")
                raise
            self._after_write()
        if skipped:
            log.warning("records skipped while indexing", extra={"source": source, "skipped": skipped})
        return row

    def remove_source(self, source: str) -> None:
        with self._writer_lock:
            writer = self._writer
            writer.execute("BEGIN IMMEDIATE")
            try:
                for statement in _DELETE_SOURCE:
                    writer.execute(statement, (source,))
                writer.execute("DELETE FROM sources WHERE name = ?", (source,))
                writer.execute("COMMIT")
            except BaseException:
                writer.execute("ROLLBACK")
                raise
            self._after_write()

    def _after_write(self) -> None:
        # Fresh statistics keep the planner choosing the selective index per filter; the
        # checkpoint returns the write-ahead log's space once readers have moved on.
        self._writer.execute("ANALYZE")
        self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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
        low, high = filters.min_parameters, filters.max_parameters
        if low is not None and high is not None and low > high:
            return []  # an empty range: no need to scan for nothing
        key = SORT_COLUMNS[sort]
        clauses: list[str] = []
        params: list[object] = []
        if filters.text_terms:
            clauses.append("e.rowid IN (SELECT rowid FROM entries_text WHERE entries_text MATCH ?)")
            params.append(_match_expression(filters.text_terms))
        for column, value in (
            ("source", filters.source),
            ("pipeline_tag", filters.pipeline_tag),
            ("library", filters.library),
            ("author", filters.author),
        ):
            if value is not None:
                clauses.append(f"e.{column} = ?")
                params.append(value)

        # On the negated keys: `k <= -min` holds only for present values >= min, and `-max <= k <= 0`
        # only for present values <= max (absent is 1). A range on the sorted fact walks that
        # fact's index; on another fact the unary `+` keeps the planner off its index, because a
        # range rarely excludes most entries and fetching them all to sort them costs more than
        # walking the sort order and skipping the few that fail.
        def key_of(sorted_by: SearchSort) -> str:
            column = SORT_COLUMNS[sorted_by]
            return f"e.{column}" if column == key else f"+e.{column}"

        parameters, weights = key_of(SearchSort.PARAMETER_COUNT), key_of(SearchSort.WEIGHTS_BYTES)
        if filters.min_parameters is not None:
            clauses.append(f"{parameters} <= ?")
            params.append(-filters.min_parameters)
        if filters.max_parameters is not None:
            clauses.append(f"{parameters} BETWEEN ? AND 0")
            params.append(-filters.max_parameters)
        if filters.max_weights_bytes is not None:
            clauses.append(f"{weights} BETWEEN ? AND 0")
            params.append(-filters.max_weights_bytes)
        if after is not None:
            clauses.append(f"(e.{key}, e.source, e.id) > (?, ?, ?)")
            params.extend(after)
        if filters.verdict is not None:
            # Last, so the Python function runs only for rows every cheaper condition let through.
            clauses.append(f"{VERDICT_FUNCTION}(e.weights_bytes) = ?")
            params.append(filters.verdict)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        # One statement, so the page and its documents come from the same snapshot.
        sql = (
            f"SELECT hit.source, hit.id, hit.key, hit.weights_bytes, d.document FROM ("
            f"SELECT e.rowid AS rowid, e.source AS source, e.id AS id, e.{key} AS key, "
            f"e.weights_bytes AS weights_bytes FROM entries AS e {where} "
            f"ORDER BY e.{key}, e.source, e.id LIMIT ?"
            ") AS hit JOIN documents AS d ON d.rowid = hit.rowid ORDER BY hit.key, hit.source, hit.id"
        )
        params.append(limit)
        with self._reader() as reader:
            reader.create_function(VERDICT_FUNCTION, 1, verdict_of, deterministic=True)
            found = reader.execute(sql, params).fetchall()
        return [Row(source=s, id=i, key=k, weights_bytes=w, document=d) for s, i, k, w, d in found]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._writer_lock:
            self._writer.close()
        for reader in self._all_readers:
            reader.close()
        if self._owned_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
