"""The api's catalog search over a directory store, without a cluster: `ai-models catalog search`.

The CLI reaches the api's code only through this module and `server.serve` (the import contract
"the CLI uses catalog, never api internals" in the root pyproject.toml allows exactly these two), so
the search it prints is the search the api serves: the same index, query, ranking and entry shape.
Without a cluster there is no ledger, so storage usage is unknown, exactly as with a missing Secret.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import IndexBuilder
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerState, LedgerView
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import SearchQuery, SearchSort

SORTS: Final = tuple(sort.value for sort in SearchSort)
DEFAULT_SORT: Final = SearchSort.DOWNLOADS.value


class InvalidQuery(ValueError):
    """The search parameters are not a query the api accepts; the message names each parameter."""


def parse_query(parameters: Mapping[str, Any]) -> SearchQuery:
    """The query of `parameters` (the api's query parameter names), as the api would accept it."""
    try:
        return SearchQuery.model_validate(dict(parameters))
    except ValidationError as error:
        raise InvalidQuery(
            "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors())
        ) from error


def search_store(store: Path, query: SearchQuery, *, capacity_bytes: int | None) -> list[dict[str, Any]]:
    """One page of entries of the directory store `store`, in the api's entry shape."""
    index = CatalogIndex()
    try:
        IndexBuilder(store=DirectoryStore(store), index=index, metrics=ApiMetrics()).poll_once()
        ledger = LedgerView(
            read=lambda: LedgerReading(ledger=None, state=LedgerState.MISSING), capacity_bytes=capacity_bytes
        )
        entries: list[dict[str, Any]] = json.loads(Catalog(index=index, ledger=ledger).search(query))["items"]
    finally:
        index.close()
    return entries
