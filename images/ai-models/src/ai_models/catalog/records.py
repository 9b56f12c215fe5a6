"""From a Hub listing entry (and its config.json) to the catalog record the indexer stores."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ai_models.adapters.hub import HubModel
from ai_models.domain.catalog.facts import FactSources, derive_facts
from ai_models.domain.catalog.record import CatalogRecord, Gated, ProviderMetadata
from ai_models.names import CatalogProvider

CONFIG_FILE = "config.json"


def wants_config(model: HubModel, *, authenticated: bool) -> bool:
    """Whether fetching config.json can add facts, so resolver requests go only where they pay.

    No request for a repository whose file list shows no config.json (GGUF-only repositories),
    none without a commit to pin it to, and none for a gated repository without a token: the Hub
    would refuse it, and the listing's own trimmed config stands in.
    """
    if model.sha is None or model.has_file(CONFIG_FILE) is False:
        return False
    return authenticated or model.gated is Gated.NONE


def build_record(
    *,
    source: str,
    model: HubModel,
    config: Mapping[str, Any] | None,
    indexed_at: datetime.datetime,
    weights_bytes: int | None = None,
) -> CatalogRecord:
    """The stored record: provider metadata as listed, resource facts as far as they can be derived.

    `weights_bytes` is the size `HubClient.fetch_size` found for a model the listing does not
    size; the listing's own size, when it has one, comes first (D131).
    """
    facts = derive_facts(
        FactSources(
            config=config if config is not None else model.listing_config,
            safetensors_parameters=model.safetensors_parameters,
            safetensors_total=model.safetensors_total,
            gguf=model.gguf,
            tags=model.tags,
            library_name=model.library_name,
            filenames=model.filenames,
        )
    )
    if facts.weights_bytes is None and weights_bytes is not None:
        facts = facts.model_copy(update={"weights_bytes": weights_bytes})
    return CatalogRecord(
        source=source,
        id=model.id,
        provider=CatalogProvider.HUGGING_FACE,
        metadata=listing_metadata(model),
        resources=facts,
        indexedAt=indexed_at,
    )


def listing_metadata(model: HubModel) -> ProviderMetadata:
    """The record's provider metadata: the listing alone, no request (a re-sync that reuses a
    record's resource facts still takes downloads, likes and tags from the new listing)."""
    return ProviderMetadata(
        # The Hub's author is the namespace of the id; say so even when `author` was not expanded.
        author=model.author or (model.id.split("/", 1)[0] if "/" in model.id else None),
        sha=model.sha,
        pipelineTag=model.pipeline_tag,
        libraryName=model.library_name,
        tags=model.tags,
        license=model.license,
        gated=model.gated,
        downloads=model.downloads,
        likes=model.likes,
        createdAt=model.created_at,
        lastModified=model.last_modified,
    )
