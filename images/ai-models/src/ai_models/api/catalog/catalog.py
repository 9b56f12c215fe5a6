"""Answers of the catalog operations, assembled from the index and the ledger snapshot.

Entries are served as the indexed record's JSON with `downloadVerdict` spliced in: the record was
validated when it was indexed and the verdict comes from `VerdictBook`, so the bytes match the
contract's Entry without building a model per entry (tests check them against the models).
"""

from __future__ import annotations

import json

from ai_models.api.catalog.index import CatalogIndex, Row
from ai_models.api.catalog.index_query import Filters
from ai_models.api.catalog.index_schema import text_terms
from ai_models.api.catalog.ledger_view import LedgerView
from ai_models.api.catalog.paging import Cursor, decode_token, encode_token, fingerprint
from ai_models.api.catalog.verdicts import VerdictBook
from ai_models.api.models import SEARCH_PATH, SOURCES_PATH, EntryLocator, SearchQuery, Source, SourceList
from ai_models.api.problems import invalid_parameter, not_found, not_ready


def _with_verdict(document: str, weights_bytes: int | None, book: VerdictBook) -> str:
    # A stored record is a JSON object; its closing brace becomes the verdict's.
    return f'{document[:-1]},"downloadVerdict":{book.verdict_json(weights_bytes)}}}'


class Catalog:
    def __init__(self, *, index: CatalogIndex, ledger: LedgerView) -> None:
        self._index = index
        self._ledger = ledger

    def search(self, query: SearchQuery) -> bytes:
        """One page of the contract's SearchPage as JSON."""
        terms = text_terms(query.q)
        query_fingerprint = fingerprint(query, text_terms=terms)
        after = None
        if query.page_token is not None:
            cursor = decode_token(query.page_token, query_fingerprint=query_fingerprint)
            after = (cursor.key, cursor.source, cursor.id)
        book = self._ledger.verdicts()
        filters = Filters(
            text_terms=terms,
            source=query.source,
            pipeline_tag=query.pipeline_tag,
            library=query.library,
            author=query.author,
            min_parameters=query.min_parameters,
            max_parameters=query.max_parameters,
            max_weights_bytes=query.max_weights_bytes,
            verdict=query.verdict.value if query.verdict is not None else None,
        )
        # One row more than the page tells whether another page follows.
        rows = self._index.search(
            filters, sort=query.sort, after=after, limit=query.page_size + 1, verdict_of=book.verdict_name
        )
        page: list[Row] = rows[: query.page_size]
        items = ",".join(_with_verdict(row.document, row.weights_bytes, book) for row in page)
        body = f'{{"items":[{items}]'
        if len(rows) > query.page_size:
            last = page[-1]
            token = encode_token(
                Cursor(key=last.key, source=last.source, id=last.id), query_fingerprint=query_fingerprint
            )
            body += f',"nextPageToken":{json.dumps(token)}'
        return (body + "}").encode()

    def require_source(self, name: str, *, index_complete: bool) -> None:
        """Refuse a `source` filter naming no served source, as an unknown parameter is refused: an
        empty page would say the source has no such models when it does not exist (a typo)."""
        served = [row.name for row in self._index.sources()]
        if name in served:
            return
        if not index_complete:
            # Right after a start the replica has not indexed every source yet: it may be one.
            raise not_ready(
                f"source {name!r} is not indexed by this replica yet (its first index pass is still "
                "running); retry in a few seconds"
            )
        raise invalid_parameter(
            f"query parameter source: {name!r} is not a source this api serves; served sources: "
            f"{', '.join(map(repr, served)) or 'none'} (see {SOURCES_PATH}; a new ModelCatalogSource "
            "appears there once it has been indexed)"
        )

    def entry(self, locator: EntryLocator) -> bytes:
        found = self._index.entry(locator.source, locator.id)
        if found is None:
            raise not_found(
                f"source {locator.source!r} serves no model {locator.id!r} on this replica; list the served "
                f"sources at {SOURCES_PATH} and find ids with {SEARCH_PATH}"
            )
        weights_bytes, document = found
        return _with_verdict(document, weights_bytes, self._ledger.verdicts()).encode()

    def sources(self) -> SourceList:
        return SourceList(
            items=[
                Source(
                    name=row.name,
                    provider=row.provider,
                    generation=row.generation,
                    models=row.models,
                    completedAt=row.completed_at,
                )
                for row in self._index.sources()
            ]
        )
