"""The index's tables and how a catalog record becomes a row of them.

`entries` holds one narrow row per (source, id): the filter columns and one key per sort. Sort
keys are stored negated (absent = 1, after every present value) so every sort is ascending on
(key, source, id), keyset pagination is a single row-value comparison, and a range on a fact is
a range on its key. `documents` holds the record's JSON under the same rowid, read only for the
entries of a page. `entries_text` is the FTS5 table for `q`, `sources` the served generations.
"""

from __future__ import annotations

import datetime
import re
from typing import Final

from ai_models.api.models import SearchSort
from ai_models.domain.catalog.record import CatalogRecord
from ai_models.names import CatalogProvider

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
PROVIDERS: Final = frozenset(provider.value for provider in CatalogProvider)
# FTS5's unicode61 tokenizer keeps letters and digits and splits on everything else (`_` too).
_WORD = re.compile(r"[^\W_]+")

# One per sort, in page order; `weights_bytes` rides along so the verdict filter needs no row fetch.
SORT_INDEXES = "".join(
    f"CREATE INDEX entries_{column} ON entries ({column}, source, id, weights_bytes);"
    for column in SORT_COLUMNS.values()
)
SCHEMA = f"""
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
{SORT_INDEXES}
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
UPSERT = f"""
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
FILL_TEXT = """
INSERT INTO entries_text (rowid, id, author, tags, pipeline_tag, library, architecture, family)
SELECT e.rowid, e.id, e.author,
       (SELECT group_concat(value, ' ') FROM json_each(d.document, '$.metadata.tags')),
       e.pipeline_tag, e.library,
       json_extract(d.document, '$.resources.architecture'), json_extract(d.document, '$.resources.family')
FROM entries AS e JOIN documents AS d ON d.rowid = e.rowid
WHERE e.source = ?
"""

DELETE_SOURCE = (
    "DELETE FROM entries_text WHERE rowid IN (SELECT rowid FROM entries WHERE source = ?)",
    "DELETE FROM documents WHERE rowid IN (SELECT rowid FROM entries WHERE source = ?)",
    "DELETE FROM entries WHERE source = ?",
)


def text_terms(q: str | None) -> tuple[str, ...]:
    """The words of `q` as the index matches them (lower-cased; punctuation separates)."""
    return tuple(word.lower() for word in _WORD.findall(q or ""))


def match_expression(terms: tuple[str, ...]) -> str:
    # Quoted, so no word is read as FTS syntax (AND, NEAR, column filters); `*` makes each a prefix.
    return " AND ".join(f'"{term}"*' for term in terms)


def _sort_key(value: int | None) -> int:
    return -value if value is not None else ABSENT_KEY


def _timestamp_key(value: datetime.datetime | None) -> int:
    if value is None:
        return ABSENT_KEY
    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    return -int(aware.timestamp() * 1_000_000)


def record_row(record: CatalogRecord) -> tuple[object, ...]:
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
