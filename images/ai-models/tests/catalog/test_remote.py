"""The AIModels pass (catalog.remote): another cluster's Ready ClusterModels as catalog entries in
the same generation layout, page by page with checkpoints, resumed where it stopped."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.adapters.serving.listing import RemoteClusterModel, RemotePage
from ai_models.catalog.generations import write_chunk
from ai_models.catalog.indexing import Checkpoint
from ai_models.catalog.layout import generation_prefix
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.catalog.remote import RemoteSourceSpec, build_remote_record, run_remote_pass
from ai_models.names import CatalogProvider

NOW = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)
PROFILE: dict[str, Any] = {
    "format": "Safetensors",
    "architecture": "Qwen3ForCausalLM",
    "family": "qwen3",
    "parameterCount": 8_190_000_000,
    "contextWindowTokens": 40960,
    "supportedEndpointTypes": ["Chat", "TextGeneration"],
    "supportedFeatures": ["ToolCalling"],
    "resources": {
        "dtype": "BF16",
        "layers": 36,
        "kvHeads": 8,
        "headDim": 128,
        "kvCacheBytesPerToken": 147456,
    },
}


def item(
    name: str, *, size: int = 16_000_000_000, resolved: dict[str, Any] | None = None
) -> RemoteClusterModel:
    return RemoteClusterModel(
        name=name,
        digest="sha256:" + hashlib.sha256(name.encode()).hexdigest(),
        size_bytes=size,
        revision="abc123",
        resolved=PROFILE if resolved is None else resolved,
    )


class Listing:
    """The other cluster's listing in memory: pages of `size`, tokens that say where they continue."""

    def __init__(self, names: list[str]) -> None:
        self.items = [item(name) for name in sorted(names)]
        self.requests: list[tuple[str | None, int]] = []

    def list_page(self, page_token: str | None, page_size: int) -> RemotePage:
        self.requests.append((page_token, page_size))
        start = int(page_token) if page_token else 0
        page = self.items[start : start + page_size]
        more = start + page_size < len(self.items)
        return RemotePage(items=tuple(page), next_page_token=str(start + page_size) if more else None)


def spec(**overrides: Any) -> RemoteSourceSpec:
    values: dict[str, Any] = {"name": "cluster-a", "endpoint": "https://ai-models.a.example", "token": "t"}
    return RemoteSourceSpec(**{**values, **overrides})


def test_a_pass_serves_every_ready_cluster_model_as_an_entry_named_after_it(store: DirectoryStore) -> None:
    listing = Listing([f"model-{n:02}" for n in range(7)])
    checkpoints: list[Checkpoint] = []

    result = run_remote_pass(
        spec=spec(chunk_size=3),
        listing=listing,
        store=store,
        resume=None,
        on_checkpoint=checkpoints.append,
        clock=lambda: NOW,
    )

    assert result is not None
    assert result.models == 7
    assert result.chunks == 3  # one chunk per page
    assert [size for _, size in listing.requests] == [3, 3, 3]
    assert [c.processed_models for c in checkpoints] == [3, 6, 7]
    manifest = read_manifest(store, "cluster-a")
    assert manifest is not None
    assert manifest.generation == result.generation
    records = list(iter_records(store, manifest))
    assert [r.id for r in records] == [f"model-{n:02}" for n in range(7)]
    assert {r.provider for r in records} == {CatalogProvider.AI_MODELS}


def test_an_entry_carries_the_remote_facts_its_size_and_its_digest() -> None:
    record = build_remote_record(source="cluster-a", item=item("qwen3-8b"), indexed_at=NOW)

    assert record.id == "qwen3-8b"
    assert record.metadata.sha == "sha256:" + hashlib.sha256(b"qwen3-8b").hexdigest()
    assert record.metadata.pipeline_tag == "text-generation"
    assert record.metadata.tags == ("Chat", "TextGeneration", "ToolCalling")
    facts = record.resources
    # The artifact's size is what a Model from this entry reserves: it copies that artifact.
    assert facts.weights_bytes == 16_000_000_000
    assert (facts.format, facts.architecture, facts.family) == ("Safetensors", "Qwen3ForCausalLM", "qwen3")
    assert (facts.parameter_count, facts.context_length) == (8_190_000_000, 40960)
    assert (facts.dtype, facts.layers, facts.kv_heads, facts.kv_cache_bytes_per_token) == (
        "BF16",
        36,
        8,
        147456,
    )


def test_facts_this_cluster_does_not_know_or_cannot_read_are_left_out_not_the_entry() -> None:
    odd = {"architecture": "X", "resources": {"layers": -3, "dtype": "BF16", "newFact": 7}, "future": 1}

    record = build_remote_record(source="a", item=item("odd", resolved=odd), indexed_at=NOW)

    assert record.resources.architecture == "X"
    assert record.resources.dtype == "BF16"
    assert record.resources.layers is None
    assert record.resources.weights_bytes == 16_000_000_000
    bare = build_remote_record(source="a", item=item("bare", resolved={}), indexed_at=NOW)
    assert bare.resources.weights_bytes == 16_000_000_000
    assert bare.metadata.tags == ()


def test_a_stopped_pass_resumes_at_its_checkpoint_and_lists_only_the_pages_left(
    store: DirectoryStore,
) -> None:
    listing = Listing([f"m{n}" for n in range(10)])
    checkpoints: list[Checkpoint] = []
    pages = iter([False, False, True])

    stopped = run_remote_pass(
        spec=spec(chunk_size=4),
        listing=listing,
        store=store,
        resume=None,
        on_checkpoint=checkpoints.append,
        clock=lambda: NOW,
        should_stop=lambda: next(pages),
    )
    assert stopped is None
    assert read_manifest(store, "cluster-a") is None
    assert checkpoints[-1].processed_models == 8
    listing.requests.clear()

    resumed = run_remote_pass(
        spec=spec(chunk_size=4),
        listing=listing,
        store=store,
        resume=checkpoints[-1],
        on_checkpoint=checkpoints.append,
        clock=lambda: NOW,
    )

    assert resumed is not None
    assert resumed.generation == checkpoints[0].generation
    assert listing.requests == [("8", 4)]
    manifest = read_manifest(store, "cluster-a")
    assert manifest is not None
    assert sorted(r.id for r in iter_records(store, manifest)) == sorted(f"m{n}" for n in range(10))


@pytest.mark.parametrize(
    "cursor",
    [
        "eyJxdWVyeSI6MH0",  # a Hugging Face pass's cursor: another provider's position
        None,
    ],
)
def test_a_checkpoint_that_is_not_an_aimodels_one_starts_a_fresh_pass(
    store: DirectoryStore, cursor: str | None
) -> None:
    listing = Listing(["a", "b"])
    old = Checkpoint(generation="20261201T000000Z", cursor=cursor, processed_models=1)
    write_chunk(
        store,
        "cluster-a",
        old.generation,
        0,
        [build_remote_record(source="cluster-a", item=item("a"), indexed_at=NOW)],
    )

    result = run_remote_pass(
        spec=spec(), listing=listing, store=store, resume=old, on_checkpoint=lambda _: None, clock=lambda: NOW
    )

    assert result is not None
    assert result.generation != old.generation
    assert listing.requests == [(None, 100)]
    # The abandoned generation goes with the flip, as after a Hugging Face pass.
    assert not list(store.list(generation_prefix("cluster-a", old.generation)))


def test_the_spec_comes_from_the_aimodels_block() -> None:
    obj = {
        "metadata": {"name": "cluster-a"},
        "spec": {
            "provider": "AIModels",
            "aiModels": {
                "endpoint": "https://ai-models.a.example/",
                "caBundle": "PEM",
                "tokenSecretRef": {"name": "x"},
            },
            "chunkSize": 50,
        },
    }
    read = RemoteSourceSpec.from_resource(obj, token="secret")
    assert (read.endpoint, read.ca_bundle, read.chunk_size, read.page_size) == (
        "https://ai-models.a.example",
        "PEM",
        50,
        50,
    )
    assert "secret" not in repr(read)
    with pytest.raises(ValueError, match=r"spec\.aiModels\.endpoint"):
        RemoteSourceSpec.from_resource({"metadata": {"name": "x"}, "spec": {"aiModels": {}}}, token="t")
