"""Where a pass stands in its listings, as the opaque `cursor` string of a checkpoint.

    "<query>:<start>:<hub cursor>"

`query` is the index of a listing (`SourceSpec.query(index)`); `start` is how many models were
written before that query began (it fixes the query's share of `maxModels`); the Hub cursor is
the `Link` URL of the query's next page, empty for its first page. `query == query_count` means
every listing is done and only the manifest flip remains.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class PassPosition:
    query: int = 0
    start: int = 0
    hub_cursor: str | None = None

    def __post_init__(self) -> None:
        if self.query < 0 or self.start < 0:
            raise ValueError(f"a pass position counts from 0, got query={self.query} start={self.start}")

    def encode(self) -> str:
        return f"{self.query}:{self.start}:{self.hub_cursor or ''}"

    @classmethod
    def decode(cls, text: str) -> PassPosition:
        """Raises ValueError for anything `encode` cannot have produced."""
        query, start, hub_cursor = _split(text)
        if not (query.isdigit() and start.isdigit()):
            raise ValueError(f"not a catalog pass cursor: {text[:80]!r}")
        return cls(query=int(query), start=int(start), hub_cursor=hub_cursor or None)

    def next_page(self, hub_cursor: str) -> PassPosition:
        return dataclasses.replace(self, hub_cursor=hub_cursor)

    def next_query(self, *, written: int) -> PassPosition:
        return PassPosition(query=self.query + 1, start=written)

    @classmethod
    def finished(cls, *, queries: int, written: int) -> PassPosition:
        return cls(query=queries, start=written)


def _split(text: str) -> tuple[str, str, str]:
    parts = text.split(":", 2)
    if len(parts) != 3:
        raise ValueError(f"not a catalog pass cursor: {text[:80]!r}")
    return parts[0], parts[1], parts[2]
