"""The SQL of one search: filters, keyset position and sort, as a statement and its parameters."""

from __future__ import annotations

import dataclasses

from ai_models.api.catalog.index_schema import SORT_COLUMNS, VERDICT_FUNCTION, match_expression
from ai_models.api.models import SearchSort


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

    def empty(self) -> bool:
        """Whether no entry can match, whatever the index holds (a parameter range min > max)."""
        low, high = self.min_parameters, self.max_parameters
        return low is not None and high is not None and low > high


def search_statement(
    filters: Filters, *, sort: SearchSort, after: tuple[int, str, str] | None, limit: int
) -> tuple[str, list[object]]:
    """SQL selecting (source, id, key, weights_bytes, document) of up to `limit` hits in page order.

    The verdict condition calls the SQLite function `VERDICT_FUNCTION`, which the caller registers.
    """
    key = SORT_COLUMNS[sort]
    clauses: list[str] = []
    params: list[object] = []
    if filters.text_terms:
        clauses.append("e.rowid IN (SELECT rowid FROM entries_text WHERE entries_text MATCH ?)")
        params.append(match_expression(filters.text_terms))
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
    return sql, params
