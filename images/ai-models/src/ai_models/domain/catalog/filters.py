"""The filters of a catalog source, checked on every listed record before it is stored.

The provider's own query parameters only narrow the traffic: a mirror that ignores one, or a Hub
that answers a broader question than it was asked, must not put a model the source excludes into
the catalog. Each filter is read here the way the Hub applies it, so the re-check never drops
what the Hub rightly returned:

    authors       the namespace of the id is one of them (names compared case-insensitively, as
                  Hub namespaces are)
    search        a substring of the id, case-insensitively (`HfApi.list_models`: "a string that
                  will be contained in the returned model ids")
    pipelineTags  the listed pipeline tag is one of them
    libraries     one of them is the listed library or one of the tags (the Hub filters by
                  library through the tag of the same name; GGUF repositories carry `gguf` as a tag)
    tags          every one of them is a tag of the model
    includeGated  false: only models that are not gated
    min/maxParameters  the derived parameter count is within the bounds; an unknown count is
                  outside any bound that is set (the source promises "at least N parameters")

Pure: no I/O, no clock; `rejection` says which filter refused a model (for the pass's log).
"""

from __future__ import annotations

import dataclasses
import enum

from ai_models.domain.catalog.record import Gated, ProviderMetadata


class Rejection(enum.StrEnum):
    AUTHOR = "authors"
    SEARCH = "search"
    PIPELINE_TAG = "pipelineTags"
    LIBRARY = "libraries"
    TAGS = "tags"
    GATED = "includeGated"
    PARAMETERS = "parameters"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CatalogFilter:
    """The filter fields of `spec.huggingFace`; an empty tuple or None filters nothing."""

    authors: tuple[str, ...] = ()
    search: str | None = None
    pipeline_tags: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    include_gated: bool = False
    min_parameters: int | None = None
    max_parameters: int | None = None

    @property
    def filters_parameters(self) -> bool:
        return self.min_parameters is not None or self.max_parameters is not None

    def listing_rejection(self, model_id: str, metadata: ProviderMetadata) -> Rejection | None:
        """The first filter the listed model fails, from the listing alone; None when it passes all.

        Checked before any config.json or size request, so a model the source excludes costs none.
        """
        if self.authors:
            author = (metadata.author or model_id.split("/", 1)[0]).casefold()
            if author not in {name.casefold() for name in self.authors}:
                return Rejection.AUTHOR
        if self.search and self.search.casefold() not in model_id.casefold():
            return Rejection.SEARCH
        if self.pipeline_tags and metadata.pipeline_tag not in self.pipeline_tags:
            return Rejection.PIPELINE_TAG
        if self.libraries and not any(
            library == metadata.library_name or library in metadata.tags for library in self.libraries
        ):
            return Rejection.LIBRARY
        if any(tag not in metadata.tags for tag in self.tags):
            return Rejection.TAGS
        if not self.include_gated and metadata.gated is not Gated.NONE:
            return Rejection.GATED
        return None

    def admits_parameters(self, count: int | None) -> bool:
        if not self.filters_parameters:
            return True
        if count is None:
            return False
        if self.min_parameters is not None and count < self.min_parameters:
            return False
        return self.max_parameters is None or count <= self.max_parameters

    def rejection(
        self, model_id: str, metadata: ProviderMetadata, parameters: int | None
    ) -> Rejection | None:
        """The first filter a built record fails (listing filters first), or None."""
        found = self.listing_rejection(model_id, metadata)
        if found is None and not self.admits_parameters(parameters):
            return Rejection.PARAMETERS
        return found
