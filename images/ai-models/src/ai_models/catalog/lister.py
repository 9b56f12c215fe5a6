"""Listing pages for a pass, asking for the next page while the current one is being indexed.

A Hub listing page with expanded properties takes the Hub a while to build, and indexing a page
(config.json fetches, records, the chunk write) takes about as long; overlapping the two nearly
halves a pass. A page is asked for ahead only when the pass is certain to need it, so prefetching
never costs an extra API request, except when the pass is stopped or fails in between.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Protocol

from ai_models.adapters.hub import HubModel, HubPage, HubQuery
from ai_models.catalog.cursor import PassPosition

logger = logging.getLogger(__name__)


class ListingClient(Protocol):
    """What a pass needs from a provider; `HubClient` is the Hugging Face one."""

    def list_page(self, query: HubQuery, cursor: str | None) -> HubPage: ...

    def fetch_configs(self, models: Sequence[HubModel]) -> Mapping[str, Mapping[str, Any] | None]: ...

    def fetch_sizes(self, models: Sequence[HubModel]) -> Mapping[str, int | None]: ...


class Listings(Protocol):
    """The listings of a pass by position; `SourceSpec` computes each one from its index."""

    def query(self, index: int) -> HubQuery: ...


class PageLister:
    def __init__(self, hub: ListingClient, listings: Listings) -> None:
        self._hub = hub
        self._listings = listings
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="catalog-listing")
        self._ahead: tuple[PassPosition, Future[HubPage]] | None = None

    def page(self, position: PassPosition) -> HubPage:
        """The page at `position`: the one asked for ahead if it is that one, else asked now."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == position:
            # Errors of the early request surface here, after the previous page's checkpoint.
            return ahead[1].result()
        if ahead is not None:
            ahead[1].cancel()
        return self._hub.list_page(self._listings.query(position.query), position.hub_cursor)

    def ask_ahead(self, position: PassPosition) -> None:
        query = self._listings.query(position.query)
        self._ahead = (position, self._pool.submit(self._hub.list_page, query, position.hub_cursor))

    def close(self) -> None:
        # Not waiting: a request in flight finishes on its own and its page is dropped.
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> PageLister:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
