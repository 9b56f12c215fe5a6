"""PageLister asks for the listing a pass is at, never for the whole list of listings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ai_models.adapters.hub import HubModel, HubPage, HubQuery
from ai_models.catalog.cursor import PassPosition
from ai_models.catalog.lister import PageLister


class RecordingListings:
    """Listings that say which indexes were asked for; building all of them would be a list."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def query(self, index: int) -> HubQuery:
        self.asked.append(index)
        return HubQuery(author=f"author-{index}")

    def __len__(self) -> int:  # pragma: no cover - a lister that needs it is the defect
        raise AssertionError("the lister must not count or build the listings")


class Listing:
    def __init__(self) -> None:
        self.queries: list[tuple[str | None, str | None]] = []

    def list_page(self, query: HubQuery, cursor: str | None) -> HubPage:
        self.queries.append((query.author, cursor))
        return HubPage(models=(HubModel(id=f"{query.author}/m"),), next_cursor=None)

    def fetch_configs(self, models: Sequence[HubModel]) -> Mapping[str, Mapping[str, Any] | None]:
        return {}

    def fetch_sizes(self, models: Sequence[HubModel]) -> Mapping[str, int | None]:
        return {}


def test_the_lister_asks_only_for_the_listing_at_the_position_and_the_one_asked_ahead() -> None:
    listings, hub = RecordingListings(), Listing()
    with PageLister(hub, listings) as lister:
        page = lister.page(PassPosition(query=200))
        lister.ask_ahead(PassPosition(query=200, hub_cursor="next"))
        lister.page(PassPosition(query=200, hub_cursor="next"))

    assert [model.id for model in page.models] == ["author-200/m"]
    assert listings.asked == [200, 200]
    assert hub.queries == [("author-200", None), ("author-200", "next")]
