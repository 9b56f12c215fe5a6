"""Re-syncs reuse the served generation's facts, and every source filter is re-checked on the listing.

Passes over the fake Hub into a real directory store; request counts come from the fake's log.
"""

from __future__ import annotations

import datetime
import hashlib

import pytest

from ai_models.adapters.hub import HubClient
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.indexing import PassResult, run_pass
from ai_models.catalog.layout import generation_prefix
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.catalog.reuse import reuse_name
from ai_models.catalog.source import SourceSpec
from ai_models.domain.catalog.record import CatalogRecord
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel

SOURCE = "hf"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def spec_for(hub: FakeHub, **overrides: object) -> SourceSpec:
    fields: dict[str, object] = {"name": SOURCE, "endpoint": hub.url, "chunk_size": 25, "max_models": 0}
    fields.update(overrides)
    return SourceSpec(**fields)  # type: ignore[arg-type]


def index(spec: SourceSpec, client: HubClient, store: DirectoryStore) -> PassResult:
    result = run_pass(
        spec=spec, hub=client, store=store, resume=None, on_checkpoint=lambda _: None, clock=utcnow
    )
    assert result is not None
    return result


def served(store: DirectoryStore) -> dict[str, CatalogRecord]:
    manifest = read_manifest(store, SOURCE)
    assert manifest is not None
    return {record.id: record for record in iter_records(store, manifest)}


def configs_fetched(hub: FakeHub) -> set[str]:
    """Model ids whose config.json the pass asked the resolver for."""
    return {
        request.path.split("/resolve/", 1)[0].lstrip("/")
        for request in hub.requests("resolve")
        if request.path.endswith("/config.json")
    }


def listing_pages(hub: FakeHub) -> int:
    return sum(1 for request in hub.requests("api") if request.path == "/api/models")


def new_sha(model_id: str) -> str:
    return hashlib.sha1(f"changed {model_id}".encode()).hexdigest()


def facts_only(records: dict[str, CatalogRecord]) -> dict[str, object]:
    return {model_id: record.resources for model_id, record in records.items()}


def test_a_second_pass_over_an_unchanged_catalog_costs_the_list_pages_only(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub)
    first = index(spec, hub_client, store)
    before = served(store)
    assert configs_fetched(fake_hub), "the first pass must fetch configs, or this test proves nothing"
    pages = listing_pages(fake_hub)
    fake_hub.reset_log()

    second = index(spec, hub_client, store)

    assert second.generation != first.generation
    assert fake_hub.count("resolve") == 0
    assert fake_hub.count("api") == listing_pages(fake_hub) == pages
    after = served(store)
    assert facts_only(after) == facts_only(before)
    assert list(after) == list(before)


def test_after_a_tenth_of_the_commits_changed_exactly_those_are_fetched(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub)
    index(spec, hub_client, store)
    with_config = sorted(configs_fetched(fake_hub))
    changed = set(with_config[:: max(1, len(with_config) // 10)][: len(with_config) // 10 or 1])
    for model_id in changed:
        fake_hub.update(model_id, sha=new_sha(model_id))
    fake_hub.reset_log()

    index(spec, hub_client, store)

    assert configs_fetched(fake_hub) == changed
    records = served(store)
    assert {model_id: records[model_id].metadata.sha for model_id in changed} == {
        model_id: new_sha(model_id) for model_id in changed
    }


def test_reused_records_take_metadata_from_the_new_listing(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub)
    index(spec, hub_client, store)
    model_id = sorted(configs_fetched(fake_hub))[0]
    before = served(store)[model_id]
    fake_hub.update(model_id, downloads=(before.metadata.downloads or 0) + 12345, likes=777)
    fake_hub.reset_log()

    index(spec, hub_client, store)

    after = served(store)[model_id]
    assert model_id not in configs_fetched(fake_hub)
    assert (after.metadata.downloads, after.metadata.likes) == ((before.metadata.downloads or 0) + 12345, 777)
    assert after.resources == before.resources
    assert after.indexed_at > before.indexed_at


def test_a_listing_fact_that_changes_under_the_same_commit_is_fetched_again(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    """The Hub computes safetensors metadata after the commit: the same sha can list new facts."""
    spec = spec_for(fake_hub)
    index(spec, hub_client, store)
    model_id = next(
        model.id
        for model in fake_hub.models
        if model.safetensors is not None and model.id in configs_fetched(fake_hub)
    )
    fake_hub.update(model_id, safetensors=None)
    fake_hub.reset_log()

    index(spec, hub_client, store)

    assert configs_fetched(fake_hub) == {model_id}


def test_a_token_appearing_fetches_every_config_again(fake_hub: FakeHub, store: DirectoryStore) -> None:
    """With a token a pass may read gated configs the anonymous one could not: nothing is reused."""
    anonymous = spec_for(fake_hub)
    with HubClient(endpoint=fake_hub.url, token=None, retry_wait=0, max_retries=1) as client:
        index(anonymous, client, store)
    fetched = configs_fetched(fake_hub)
    fake_hub.reset_log()

    with HubClient(endpoint=fake_hub.url, token="hf_reader", retry_wait=0, max_retries=1) as client:
        index(spec_for(fake_hub, token="hf_reader"), client, store)

    assert configs_fetched(fake_hub) == fetched


@pytest.mark.parametrize("damage", ["missing", "not-json", "other-format"])
def test_a_chunk_without_readable_reuse_keys_is_fetched_again(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore, damage: str
) -> None:
    spec = spec_for(fake_hub)
    first = index(spec, hub_client, store)
    prefix = generation_prefix(SOURCE, first.generation)
    keys = prefix + reuse_name(0)
    only_first = first.manifest.model_copy(update={"chunks": first.manifest.chunks[:1]})
    first_chunk = {record.id for record in iter_records(store, only_first)}
    if damage == "missing":
        store.delete(keys)
    else:
        store.put_bytes(keys, b"{not json" if damage == "not-json" else b'{"format":99,"keys":{}}')
    expected = configs_fetched(fake_hub) & first_chunk
    assert expected, "the first chunk must have models with a config"
    fake_hub.reset_log()

    index(spec, hub_client, store)

    assert configs_fetched(fake_hub) == expected


def test_an_unreadable_served_manifest_makes_a_full_pass(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub)
    index(spec, hub_client, store)
    fetched = configs_fetched(fake_hub)
    store.put_bytes(f"catalog/{SOURCE}/manifest.json", b"[]")
    fake_hub.reset_log()

    index(spec, hub_client, store)

    assert configs_fetched(fake_hub) == fetched


@pytest.mark.parametrize(
    "case",
    [
        ("pipeline_tag", {"pipeline_tags": ("sentence-similarity",)}, "pipeline"),
        ("author", {"authors": ("google",)}, "author"),
        ("search", {"search": "MINILM"}, "search"),
        ("filter", {"tags": ("gguf",)}, "tags"),
        ("filter", {"libraries": ("sentence-transformers",)}, "library"),
        ("gated", {}, "not-gated"),
    ],
)
def test_a_filter_the_hub_ignores_is_still_applied(
    fake_hub: FakeHub,
    hub_client: HubClient,
    store: DirectoryStore,
    case: tuple[str, dict[str, object], str],
) -> None:
    ignored, spec_filter, keeps = case
    fake_hub.ignore_filters(ignored)
    spec = spec_for(fake_hub, **spec_filter)
    expected = {model.id for model in fake_hub.models if _kept(model, spec, keeps)}
    assert expected, "the corpus must have models the filter keeps"
    assert len(expected) < len(fake_hub.models), "the corpus must have models the filter drops"

    index(spec, hub_client, store)

    assert set(served(store)) == expected
    # Refused models cost no config request.
    assert configs_fetched(fake_hub) <= expected


def _kept(model: FakeModel, spec: SourceSpec, keeps: str) -> bool:
    if model.gated:
        return False
    if keeps == "pipeline":
        return model.pipeline_tag in spec.pipeline_tags
    if keeps == "author":
        return model.author in spec.authors
    if keeps == "search":
        return (spec.search or "").lower() in model.id.lower()
    if keeps == "tags":
        return all(tag in model.tags for tag in spec.tags)
    if keeps == "library":
        return any(library == model.library_name or library in model.tags for library in spec.libraries)
    return True


def test_the_parameter_range_applies_to_reused_records_too(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    index(spec_for(fake_hub), hub_client, store)
    counts = {
        model_id: record.resources.parameter_count
        for model_id, record in served(store).items()
        if record.resources.parameter_count is not None
    }
    bound = sorted(counts.values())[len(counts) // 2]
    fake_hub.reset_log()

    index(spec_for(fake_hub, min_parameters=bound), hub_client, store)

    assert set(served(store)) == {model_id for model_id, count in counts.items() if count >= bound}
    assert fake_hub.count("resolve") == 0
