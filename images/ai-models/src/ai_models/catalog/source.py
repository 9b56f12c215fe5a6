"""What one ModelCatalogSource asks the indexer to do, read once from the object.

The Hub takes one author, one pipeline tag and a list of tags that must all be present, while the
source's `authors`, `pipelineTags` and `libraries` each mean "any of these". A source with
several values is therefore indexed as one Hub listing per combination, walked one after another
in a stable order; `tags` stay a single AND filter.

The number of combinations is bounded (`MAX_LISTING_QUERIES`, also a CEL rule on the CRD), and
they are never built as a list: `query(index)` computes the one a pass is at, and `queries()`
yields them one at a time, so a pass holds one query whatever the source says.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from ai_models.adapters.hub import HubQuery
from ai_models.domain.catalog.filters import CatalogFilter
from ai_models.names import CatalogProvider, CatalogSort

DEFAULT_MAX_MODELS: Final = 500
DEFAULT_CHUNK_SIZE: Final = 100
MAX_CHUNK_SIZE: Final = 1000
# Hub listings one pass may walk: authors x pipelineTags x libraries (an empty list counts as one).
# Each is at least one request per pass, so this also bounds the requests a source costs the Hub.
MAX_LISTING_QUERIES: Final = 256


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceSpec:
    name: str
    endpoint: str
    token: str | None = dataclasses.field(default=None, repr=False)
    authors: tuple[str, ...] = ()
    search: str | None = None
    pipeline_tags: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    include_gated: bool = False
    min_parameters: int | None = None
    max_parameters: int | None = None
    sort: CatalogSort = CatalogSort.DOWNLOADS
    max_models: int = DEFAULT_MAX_MODELS  # 0: no limit
    chunk_size: int = DEFAULT_CHUNK_SIZE
    provider: CatalogProvider = CatalogProvider.HUGGING_FACE

    def __post_init__(self) -> None:
        if not 1 <= self.chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunkSize must be between 1 and {MAX_CHUNK_SIZE}, got {self.chunk_size}")
        if self.max_models < 0:
            raise ValueError(f"maxModels must not be negative, got {self.max_models}")
        low, high = self.min_parameters, self.max_parameters
        if low is not None and high is not None and low > high:
            raise ValueError(f"minParameters ({low}) must not be greater than maxParameters ({high})")
        if self.query_count > MAX_LISTING_QUERIES:
            raise ValueError(
                f"spec.huggingFace asks for {self.query_count} Hub listings "
                f"({len(self.authors) or 1} authors x {len(self.pipeline_tags) or 1} pipelineTags x "
                f"{len(self.libraries) or 1} libraries), more than the {MAX_LISTING_QUERIES} one source "
                "may walk: split it into several ModelCatalogSources or list fewer values"
            )

    @classmethod
    def from_resource(cls, obj: Mapping[str, Any], *, default_endpoint: str, token: str | None) -> SourceSpec:
        """The spec of a ModelCatalogSource object (as the API server returns it, defaults applied or not)."""
        spec = obj.get("spec") or {}
        hf = spec.get("huggingFace") or {}
        return cls(
            name=str(obj["metadata"]["name"]),
            provider=CatalogProvider(spec.get("provider") or CatalogProvider.HUGGING_FACE),
            endpoint=str(hf.get("endpoint") or default_endpoint).rstrip("/"),
            token=token or None,
            authors=_set(hf.get("authors")),
            search=hf.get("search") or None,
            pipeline_tags=_set(hf.get("pipelineTags")),
            libraries=_set(hf.get("libraries")),
            tags=_set(hf.get("tags")),
            include_gated=bool(hf.get("includeGated", False)),
            min_parameters=_optional_int(hf.get("minParameters")),
            max_parameters=_optional_int(hf.get("maxParameters")),
            sort=CatalogSort(hf.get("sort") or CatalogSort.DOWNLOADS),
            max_models=_int(hf.get("maxModels"), DEFAULT_MAX_MODELS),
            chunk_size=_int(spec.get("chunkSize"), DEFAULT_CHUNK_SIZE),
        )

    @property
    def page_size(self) -> int:
        """Models asked per listing page: one page becomes one chunk, so never more than a chunk."""
        if self.max_models:
            return min(self.chunk_size, self.max_models)
        return self.chunk_size

    @property
    def filters_parameters(self) -> bool:
        return self.min_parameters is not None or self.max_parameters is not None

    @property
    def query_count(self) -> int:
        """How many Hub listings `queries()` yields, counted, not built."""
        return math.prod(len(values) or 1 for values in self._dimensions())

    def query(self, index: int) -> HubQuery:
        """The `index`-th listing of `queries()`, computed from the index alone (libraries vary
        fastest, then pipeline tags, then authors)."""
        if not 0 <= index < self.query_count:
            raise IndexError(f"listing {index} of a source with {self.query_count}")
        authors, pipeline_tags, libraries = self._dimensions()
        index, library = divmod(index, len(libraries) or 1)
        author, pipeline_tag = divmod(index, len(pipeline_tags) or 1)
        return self._listing(
            author=authors[author] if authors else None,
            pipeline_tag=pipeline_tags[pipeline_tag] if pipeline_tags else None,
            library=libraries[library] if libraries else None,
        )

    def queries(self) -> Iterator[HubQuery]:
        """The Hub listings whose union is this source, in the order a pass walks them, one at a time."""
        return (self.query(index) for index in range(self.query_count))

    def _dimensions(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        return self.authors, self.pipeline_tags, self.libraries

    def _listing(self, *, author: str | None, pipeline_tag: str | None, library: str | None) -> HubQuery:
        return HubQuery(
            author=author,
            search=self.search,
            pipeline_tag=pipeline_tag,
            # The Hub tags each model with its library, so a library is one more required tag.
            filters=tuple(dict.fromkeys((*((library,) if library else ()), *self.tags))),
            include_gated=self.include_gated,
            sort=self.sort,
            limit=self.page_size,
        )

    @property
    def catalog_filter(self) -> CatalogFilter:
        """Every filter of the spec, re-checked on each listed record before it is stored: the Hub's
        query parameters only narrow the traffic (domain.catalog.filters)."""
        return CatalogFilter(
            authors=self.authors,
            search=self.search,
            pipeline_tags=self.pipeline_tags,
            libraries=self.libraries,
            tags=self.tags,
            include_gated=self.include_gated,
            min_parameters=self.min_parameters,
            max_parameters=self.max_parameters,
        )

    def admits_parameters(self, count: int | None) -> bool:
        """The minParameters/maxParameters filter. An unknown count is outside any bound that is set:
        the source promises "at least N parameters", which a model of unknown size does not show."""
        return self.catalog_filter.admits_parameters(count)

    def fingerprint(self) -> str:
        """Stable hash of everything that changes what a pass produces.

        The token's value is left out (rotating it changes nothing indexed), but whether there is
        one is not: a token makes gated and private models visible. A checkpoint taken under another
        fingerprint must not be resumed, because its cursor and offsets mean something else.
        """
        facts = {
            "provider": str(self.provider),
            "endpoint": self.endpoint,
            "authenticated": self.token is not None,
            "authors": self.authors,
            "search": self.search,
            "pipelineTags": self.pipeline_tags,
            "libraries": self.libraries,
            "tags": self.tags,
            "includeGated": self.include_gated,
            "minParameters": self.min_parameters,
            "maxParameters": self.max_parameters,
            "sort": str(self.sort),
            "maxModels": self.max_models,
            "chunkSize": self.chunk_size,
        }
        canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _set(values: Iterable[str] | None) -> tuple[str, ...]:
    """A CRD `list-type: set` in canonical order, so reordering it changes neither queries nor fingerprint."""
    return tuple(sorted({str(value) for value in values or () if value}))


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))


def _int(value: object, default: int) -> int:
    return default if value is None else int(str(value))
