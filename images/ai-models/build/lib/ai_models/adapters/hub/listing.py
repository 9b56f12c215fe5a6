"""The Hub's model listing: the query we send and the model objects we read back.

One listing request must carry everything the catalog needs about a model, so the query asks
the Hub to `expand` exactly those properties; the full `config.json` is the only other request
per model (to the resolver, see client.py). Parsing is tolerant: a field of an unexpected type is
treated as absent, so one odd repository never fails a page.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, Final

from ai_models.domain.catalog.record import Gated
from ai_models.names import CatalogSort

# Listing properties the catalog record and its resource facts are built from. `license` is read
# from the `license:<id>` tag the Hub derives from the model card, so the (large) cardData is not
# requested; `config` is the Hub's trimmed config, a fallback when config.json cannot be fetched.
LISTING_EXPAND: Final = (
    "author",
    "sha",
    "pipeline_tag",
    "library_name",
    "tags",
    "gated",
    "downloads",
    "likes",
    "createdAt",
    "lastModified",
    "safetensors",
    "gguf",
    "siblings",
    "config",
)

HUB_SORT_KEYS: Final[Mapping[CatalogSort, str]] = {
    CatalogSort.DOWNLOADS: "downloads",
    CatalogSort.LIKES: "likes",
    CatalogSort.LAST_MODIFIED: "lastModified",
    CatalogSort.CREATED_AT: "createdAt",
    CatalogSort.TRENDING_SCORE: "trendingScore",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class HubQuery:
    """One listing of `GET /api/models`, in the Hub's own terms."""

    author: str | None = None
    search: str | None = None
    pipeline_tag: str | None = None
    filters: tuple[str, ...] = ()  # tags every listed model carries (the Hub ANDs them)
    include_gated: bool = False
    sort: CatalogSort = CatalogSort.DOWNLOADS
    limit: int = 100

    def params(self) -> list[tuple[str, str]]:
        """Query parameters of the first page; later pages follow the Hub's `Link` URL instead."""
        params: list[tuple[str, str]] = []
        if self.author:
            params.append(("author", self.author))
        if self.search:
            params.append(("search", self.search))
        if self.pipeline_tag:
            params.append(("pipeline_tag", self.pipeline_tag))
        params.extend(("filter", tag) for tag in self.filters)
        if not self.include_gated:
            params.append(("gated", "false"))
        params.append(("sort", HUB_SORT_KEYS[self.sort]))
        params.append(("direction", "-1"))
        params.append(("limit", str(self.limit)))
        params.extend(("expand", name) for name in LISTING_EXPAND)
        return params


@dataclasses.dataclass(frozen=True, kw_only=True)
class HubModel:
    """One model of a listing page; None means the Hub did not say (or said something unusable)."""

    id: str
    author: str | None = None
    sha: str | None = None
    pipeline_tag: str | None = None
    library_name: str | None = None
    tags: tuple[str, ...] = ()
    gated: Gated = Gated.NONE
    downloads: int | None = None
    likes: int | None = None
    created_at: datetime.datetime | None = None
    last_modified: datetime.datetime | None = None
    safetensors_parameters: Mapping[str, int] | None = None
    safetensors_total: int | None = None
    gguf: Mapping[str, Any] | None = None
    filenames: tuple[str, ...] | None = None  # None: the Hub sent no file list
    listing_config: Mapping[str, Any] | None = None

    @property
    def license(self) -> str | None:
        for tag in self.tags:
            if tag.startswith("license:") and len(tag) > len("license:"):
                return tag.removeprefix("license:")
        return None

    def has_file(self, name: str) -> bool | None:
        """Whether the repository has `name` at its root; None when the listing had no file list."""
        if self.filenames is None:
            return None
        return name in self.filenames


@dataclasses.dataclass(frozen=True)
class HubPage:
    models: tuple[HubModel, ...]
    next_cursor: str | None  # the Hub's `Link: <...>; rel="next"` URL, None on the last page


def parse_model(item: object) -> HubModel | None:
    """A listing element as a HubModel; None when it has no usable id (nothing to key it by).

    Input is decoded JSON, so objects are exactly `dict` and arrays exactly `list`; checking for
    those (not the Mapping/Sequence ABCs) keeps parsing cheap on large pages.
    """
    if not isinstance(item, dict):
        return None
    model_id = _text(item.get("id")) or _text(item.get("modelId"))
    if model_id is None:
        return None
    safetensors = item.get("safetensors")
    safetensors = safetensors if isinstance(safetensors, dict) else {}
    return HubModel(
        id=model_id,
        author=_text(item.get("author")),
        sha=_text(item.get("sha")),
        pipeline_tag=_text(item.get("pipeline_tag")),
        library_name=_text(item.get("library_name")),
        tags=_texts(item.get("tags")),
        gated=_gated(item.get("gated")),
        downloads=_count(item.get("downloads")),
        likes=_count(item.get("likes")),
        created_at=_timestamp(item.get("createdAt")),
        last_modified=_timestamp(item.get("lastModified")),
        safetensors_parameters=_dtype_counts(safetensors.get("parameters")),
        safetensors_total=_count(safetensors.get("total")),
        gguf=_mapping(item.get("gguf")),
        filenames=_filenames(item.get("siblings")),
        listing_config=_mapping(item.get("config")),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str) and item)


def _count(value: object) -> int | None:
    # bool is an int in Python; a `true` download count is not a count.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, dict) else None


def _gated(value: object) -> Gated:
    if value is None or value is False:
        return Gated.NONE
    if value == "auto":
        return Gated.AUTO
    # "manual", or a gate whose mode the Hub did not name: assume someone must approve access.
    return Gated.MANUAL


def _timestamp(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def _dtype_counts(value: object) -> Mapping[str, int] | None:
    if not isinstance(value, dict):
        return None
    counts = {str(dtype): count for dtype, count in value.items() if _count(count) is not None}
    return counts or None


def _filenames(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    names = [entry.get("rfilename") for entry in value if type(entry) is dict]
    return tuple(name for name in names if type(name) is str and name)
