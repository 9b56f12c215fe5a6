"""SourceSpec: read from a ModelCatalogSource, turned into Hub listings, fingerprinted."""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from ai_models.adapters.hub import HubQuery
from ai_models.catalog.source import MAX_LISTING_QUERIES, SourceSpec
from ai_models.names import CatalogSort

DEFAULT_ENDPOINT = "https://huggingface.co"


def resource(hugging_face: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "ModelCatalogSource",
        "metadata": {"name": "hf-top"},
        "spec": {"provider": "HuggingFace", "huggingFace": hugging_face or {}, **spec},
    }


def spec_of(hugging_face: dict[str, Any] | None = None, token: str | None = None, **spec: Any) -> SourceSpec:
    return SourceSpec.from_resource(
        resource(hugging_face, **spec), default_endpoint=DEFAULT_ENDPOINT, token=token
    )


def test_an_empty_hugging_face_section_takes_the_documented_defaults() -> None:
    spec = spec_of()

    assert spec == SourceSpec(name="hf-top", endpoint=DEFAULT_ENDPOINT)
    assert (spec.sort, spec.max_models, spec.chunk_size, spec.include_gated) == (
        CatalogSort.DOWNLOADS,
        500,
        100,
        False,
    )
    assert spec.min_parameters is None
    assert spec.max_parameters is None


def test_every_field_is_read_from_the_resource() -> None:
    spec = spec_of(
        {
            "endpoint": "https://hf-mirror.example/",
            "authors": ["mistralai", "meta-llama"],
            "search": "Instruct",
            "pipelineTags": ["text-generation"],
            "libraries": ["transformers"],
            "tags": ["conversational"],
            "includeGated": True,
            "minParameters": 1_000,
            "maxParameters": 9_000,
            "sort": "Likes",
            "maxModels": 0,
        },
        token="hf_token",
        chunkSize=50,
    )

    assert spec == SourceSpec(
        name="hf-top",
        endpoint="https://hf-mirror.example",
        token="hf_token",
        authors=("meta-llama", "mistralai"),
        search="Instruct",
        pipeline_tags=("text-generation",),
        libraries=("transformers",),
        tags=("conversational",),
        include_gated=True,
        min_parameters=1_000,
        max_parameters=9_000,
        sort=CatalogSort.LIKES,
        max_models=0,
        chunk_size=50,
    )


def test_the_token_never_appears_in_the_spec_repr() -> None:
    assert "hf_secret" not in repr(spec_of(token="hf_secret"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"chunk_size": 0}, "chunkSize"),
        ({"chunk_size": 1001}, "chunkSize"),
        ({"max_models": -1}, "maxModels"),
        ({"min_parameters": 10, "max_parameters": 9}, "minParameters"),
    ],
)
def test_values_the_crd_forbids_are_refused(fields: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SourceSpec(name="x", endpoint=DEFAULT_ENDPOINT, **fields)  # type: ignore[arg-type]


def test_single_valued_filters_make_one_listing() -> None:
    spec = spec_of(
        {
            "authors": ["google"],
            "pipelineTags": ["text-generation"],
            "libraries": ["transformers"],
            "tags": ["conversational", "transformers"],
            "search": "gemma",
            "sort": "TrendingScore",
        }
    )

    assert tuple(spec.queries()) == (
        HubQuery(
            author="google",
            search="gemma",
            pipeline_tag="text-generation",
            filters=("transformers", "conversational"),
            sort=CatalogSort.TRENDING_SCORE,
            limit=100,
        ),
    )


def test_several_authors_tags_and_libraries_make_one_listing_per_combination() -> None:
    spec = spec_of(
        {"authors": ["b", "a"], "pipelineTags": ["t1", "t2"], "libraries": ["gguf"], "tags": ["x"]}
    )

    queries = spec.queries()

    assert [(query.author, query.pipeline_tag, query.filters) for query in queries] == [
        ("a", "t1", ("gguf", "x")),
        ("a", "t2", ("gguf", "x")),
        ("b", "t1", ("gguf", "x")),
        ("b", "t2", ("gguf", "x")),
    ]


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:02d}" for index in range(count)]


def test_a_source_of_more_listings_than_allowed_is_refused_naming_the_limit_and_the_fix() -> None:
    # 64 authors x 64 pipeline tags x 64 libraries: 262,144 Hub listings per pass.
    with pytest.raises(ValueError, match="262144 Hub listings") as refused:
        spec_of({"authors": values("a", 64), "pipelineTags": values("p", 64), "libraries": values("l", 64)})
    assert str(MAX_LISTING_QUERIES) in str(refused.value)
    assert "split it into several ModelCatalogSources" in str(refused.value)


def test_listings_are_computed_one_at_a_time_never_built_as_a_list() -> None:
    spec = spec_of({"authors": values("a", 64), "pipelineTags": values("p", 2), "libraries": values("l", 2)})

    listings = spec.queries()

    assert isinstance(listings, Iterator)
    assert spec.query_count == MAX_LISTING_QUERIES
    expected = list(itertools.product(values("a", 64), values("p", 2), values("l", 2)))
    walked = [(query.author, query.pipeline_tag, query.filters[0]) for query in listings]
    assert walked == expected
    assert [spec.query(index) for index in (0, 77, 255)] == [
        spec_of({"authors": [author], "pipelineTags": [tag], "libraries": [library]}).query(0)
        for author, tag, library in (expected[0], expected[77], expected[255])
    ]
    with pytest.raises(IndexError):
        spec.query(MAX_LISTING_QUERIES)


def test_counting_the_listings_of_the_largest_source_allocates_nothing_per_listing() -> None:
    spec = spec_of({"authors": values("a", 64), "pipelineTags": values("p", 2), "libraries": values("l", 2)})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):  # what a pass does once per page
            assert spec.query_count == MAX_LISTING_QUERIES
            spec.query(200)
        grown = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # One HubQuery at a time (a few hundred bytes), not 256 of them per call.
    assert grown < 16 * 1024


def test_page_size_is_the_chunk_size_but_never_above_max_models() -> None:
    assert spec_of({"maxModels": 30}, chunkSize=100).page_size == 30
    assert spec_of({"maxModels": 0}, chunkSize=100).page_size == 100
    assert spec_of({"maxModels": 500}, chunkSize=40).query(0).limit == 40


def test_gated_models_are_excluded_unless_included() -> None:
    assert spec_of().query(0).include_gated is False
    assert spec_of({"includeGated": True}).query(0).include_gated is True


@pytest.mark.parametrize(
    ("bounds", "count", "admitted"),
    [
        ({}, None, True),
        ({}, 7, True),
        ({"minParameters": 10}, None, False),
        ({"maxParameters": 10}, None, False),
        ({"minParameters": 10}, 10, True),
        ({"minParameters": 10}, 9, False),
        ({"maxParameters": 10}, 10, True),
        ({"maxParameters": 10}, 11, False),
        ({"minParameters": 5, "maxParameters": 10}, 7, True),
    ],
)
def test_parameter_bounds_are_inclusive_and_exclude_unknown_sizes(
    bounds: dict[str, int], count: int | None, admitted: bool
) -> None:
    assert spec_of(bounds).admits_parameters(count) is admitted


def test_fingerprint_ignores_set_order_and_the_token_value() -> None:
    base = spec_of({"authors": ["a", "b"], "tags": ["x", "y"]}, token="one")

    assert (
        spec_of({"authors": ["b", "a"], "tags": ["y", "x"]}, token="two").fingerprint() == base.fingerprint()
    )


@pytest.mark.parametrize(
    "change",
    [
        {"endpoint": "https://mirror.example"},
        {"authors": ["a"]},
        {"search": "x"},
        {"pipelineTags": ["text-generation"]},
        {"libraries": ["gguf"]},
        {"tags": ["x"]},
        {"includeGated": True},
        {"minParameters": 1},
        {"maxParameters": 1},
        {"sort": "Likes"},
        {"maxModels": 10},
    ],
)
def test_fingerprint_changes_with_anything_that_changes_the_pass(change: dict[str, Any]) -> None:
    assert spec_of(change).fingerprint() != spec_of().fingerprint()


def test_fingerprint_changes_with_chunk_size_and_with_having_a_token() -> None:
    base = spec_of().fingerprint()

    assert spec_of(chunkSize=10).fingerprint() != base
    assert spec_of(token="t").fingerprint() != base
    assert spec_of().fingerprint() == base
