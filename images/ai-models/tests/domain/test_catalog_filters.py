"""The source filter predicate: each filter read as the Hub applies it, and nothing kept that one refuses."""

from __future__ import annotations

import pytest

from ai_models.domain.catalog.filters import CatalogFilter, Rejection
from ai_models.domain.catalog.record import Gated, ProviderMetadata

MODEL = "Qwen/Qwen2.5-7B-Instruct"
METADATA = ProviderMetadata(
    author="Qwen",
    pipelineTag="text-generation",
    libraryName="transformers",
    tags=("transformers", "safetensors", "qwen2", "conversational"),
)


@pytest.mark.parametrize(
    "source_filter",
    [
        CatalogFilter(),
        CatalogFilter(authors=("qwen",)),  # Hub namespaces are case-insensitive
        CatalogFilter(authors=("meta-llama", "Qwen")),
        CatalogFilter(search="2.5-7b"),
        CatalogFilter(pipeline_tags=("feature-extraction", "text-generation")),
        CatalogFilter(libraries=("transformers",)),
        CatalogFilter(libraries=("qwen2",)),  # a library the Hub knows only as a tag
        CatalogFilter(tags=("safetensors", "conversational")),
        CatalogFilter(min_parameters=7_000_000_000, max_parameters=8_000_000_000),
    ],
)
def test_a_model_every_filter_admits_is_kept(source_filter: CatalogFilter) -> None:
    assert source_filter.rejection(MODEL, METADATA, 7_615_616_512) is None


@pytest.mark.parametrize(
    ("source_filter", "metadata", "parameters", "rejection"),
    [
        (CatalogFilter(authors=("meta-llama",)), METADATA, 1, Rejection.AUTHOR),
        (CatalogFilter(search="llama"), METADATA, 1, Rejection.SEARCH),
        (CatalogFilter(pipeline_tags=("feature-extraction",)), METADATA, 1, Rejection.PIPELINE_TAG),
        (
            CatalogFilter(pipeline_tags=("text-generation",)),
            METADATA.model_copy(update={"pipeline_tag": None}),
            1,
            Rejection.PIPELINE_TAG,
        ),
        (CatalogFilter(libraries=("gguf", "diffusers")), METADATA, 1, Rejection.LIBRARY),
        (CatalogFilter(tags=("safetensors", "gguf")), METADATA, 1, Rejection.TAGS),
        (CatalogFilter(), METADATA.model_copy(update={"gated": Gated.MANUAL}), 1, Rejection.GATED),
        (CatalogFilter(min_parameters=8_000_000_000), METADATA, 7_615_616_512, Rejection.PARAMETERS),
        (CatalogFilter(max_parameters=7_000_000_000), METADATA, 7_615_616_512, Rejection.PARAMETERS),
        (CatalogFilter(min_parameters=1), METADATA, None, Rejection.PARAMETERS),
    ],
)
def test_each_filter_refuses_what_it_excludes(
    source_filter: CatalogFilter, metadata: ProviderMetadata, parameters: int | None, rejection: Rejection
) -> None:
    assert source_filter.rejection(MODEL, metadata, parameters) is rejection


def test_gated_models_pass_when_the_source_includes_them() -> None:
    gated = METADATA.model_copy(update={"gated": Gated.AUTO})
    assert CatalogFilter(include_gated=True).listing_rejection(MODEL, gated) is None


def test_the_author_is_the_id_namespace_when_the_listing_has_none() -> None:
    anonymous = METADATA.model_copy(update={"author": None})
    assert CatalogFilter(authors=("Qwen",)).listing_rejection(MODEL, anonymous) is None
    assert CatalogFilter(authors=("google",)).listing_rejection(MODEL, anonymous) is Rejection.AUTHOR
