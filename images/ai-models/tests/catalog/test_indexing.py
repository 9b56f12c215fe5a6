"""Indexing passes over the fake Hub into a real directory store."""

from __future__ import annotations

import collections
import datetime
from collections.abc import Callable, Iterator

import pytest

from ai_models.adapters.hub import HubClient, ProviderRateLimited, ProviderUnavailable
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.cursor import PassPosition
from ai_models.catalog.indexing import Checkpoint, PassResult, run_pass
from ai_models.catalog.layout import chunk_name, generation_prefix, manifest_key, source_prefix
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.catalog.source import SourceSpec
from ai_models.domain.catalog.record import CatalogRecord, Gated
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, make_corpus, make_model


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Crash(Exception):
    """The controller died after the chunk was written, before the checkpoint was stored."""


def spec_for(hub: FakeHub, **overrides: object) -> SourceSpec:
    fields: dict[str, object] = {"name": "hf", "endpoint": hub.url, "chunk_size": 25, "max_models": 0}
    fields.update(overrides)
    return SourceSpec(**fields)  # type: ignore[arg-type]


def index(
    spec: SourceSpec,
    client: HubClient,
    store: DirectoryStore,
    *,
    resume: Checkpoint | None = None,
    checkpoints: list[Checkpoint] | None = None,
    hook: Callable[[Checkpoint], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> PassResult | None:
    def on_checkpoint(checkpoint: Checkpoint) -> None:
        if hook is not None:
            hook(checkpoint)
        if checkpoints is not None:
            checkpoints.append(checkpoint)

    return run_pass(
        spec=spec,
        hub=client,
        store=store,
        resume=resume,
        on_checkpoint=on_checkpoint,
        clock=utcnow,
        should_stop=should_stop,
    )


def served(store: DirectoryStore, source: str = "hf") -> list[CatalogRecord]:
    manifest = read_manifest(store, source)
    assert manifest is not None
    return list(iter_records(store, manifest))


def served_ids(store: DirectoryStore, source: str = "hf") -> list[str]:
    return [record.id for record in served(store, source)]


def stored_lines(store: DirectoryStore, source: str, generation: str) -> list[str]:
    prefix = generation_prefix(source, generation)
    chunks = [info for info in store.list(prefix) if info.key.removeprefix(prefix).startswith("chunk-")]
    return [line for info in chunks for line in store.get_bytes(info.key).decode().splitlines()]


def generations(store: DirectoryStore, source: str = "hf") -> set[str]:
    root = source_prefix(source) + "generations/"
    return {prefix.removeprefix(root).rstrip("/") for prefix in store.list_prefixes(root)}


def listed_order(
    hub: FakeHub, keep: Callable[[FakeModel], bool] = lambda model: not model.gated
) -> list[str]:
    """What the Hub lists for a Downloads-sorted source, in its order."""
    models = sorted((model for model in hub.models if keep(model)), key=lambda model: model.id)
    return [model.id for model in sorted(models, key=lambda model: model.downloads, reverse=True)]


def comparable(records: list[CatalogRecord]) -> list[dict[str, object]]:
    return [record.model_dump(exclude={"indexed_at"}) for record in records]


def test_pass_serves_every_listed_model_in_chunks_named_by_offset(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    checkpoints: list[Checkpoint] = []

    result = index(spec_for(fake_hub), hub_client, store, checkpoints=checkpoints)

    assert result is not None
    expected = listed_order(fake_hub)
    assert served_ids(store) == expected
    assert result.models == result.manifest.models == len(expected)
    offsets = [0, *(checkpoint.processed_models for checkpoint in checkpoints[:-1])]
    assert result.manifest.chunks == tuple(chunk_name(offset) for offset in offsets)
    assert result.chunks == len(checkpoints) == -(-len(expected) // 25)
    assert [checkpoint.generation for checkpoint in checkpoints] == [result.generation] * len(checkpoints)
    assert PassPosition.decode(checkpoints[-1].cursor or "").query == 1  # every listing done


def test_records_carry_listing_metadata_and_config_facts(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    deepseek = make_model("deepseek", 1)
    deepseek.downloads = 10**9  # first page
    fake_hub.add(deepseek)

    index(spec_for(fake_hub), hub_client, store)

    record = next(record for record in served(store) if record.id == deepseek.id)
    assert record.source == "hf"
    assert record.provider == "HuggingFace"
    assert record.metadata.sha == deepseek.sha
    assert record.metadata.downloads == 10**9
    assert record.metadata.license == deepseek.license
    assert record.metadata.gated is Gated.NONE
    assert record.resources.architecture == "DeepseekV3ForCausalLM"
    assert record.resources.attention == "MLA"
    assert record.resources.kv_cache_bytes_per_token == 61 * (512 + 64) * 2
    assert record.resources.experts == 256


def test_the_previous_manifest_is_served_until_the_pass_completes(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    first = index(spec_for(fake_hub), hub_client, store)
    assert first is not None
    before = served_ids(store)
    removed = [model.id for model in fake_hub.models[:10]]
    fake_hub.remove(*removed)
    fake_hub.add(*(make_model("bert", 900 + n) for n in range(5)))
    observed: list[str] = []

    second = index(
        spec_for(fake_hub),
        hub_client,
        store,
        hook=lambda _: observed.append(read_manifest(store, "hf").generation),  # type: ignore[union-attr]
    )

    assert second is not None
    assert observed
    assert set(observed) == {first.generation}
    assert read_manifest(store, "hf") == second.manifest
    assert served_ids(store) == listed_order(fake_hub)
    assert set(before) - set(served_ids(store)) == set(removed) & set(before)


def test_a_completed_pass_removes_all_generations_but_the_served_and_the_previous(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub)
    results = [index(spec, hub_client, store) for _ in range(2)]
    abandoned: list[Checkpoint] = []
    index(spec, hub_client, store, checkpoints=abandoned, should_stop=lambda: len(abandoned) >= 2)
    assert generations(store) == {results[0].generation, results[1].generation, abandoned[0].generation}  # type: ignore[union-attr]

    third = index(spec, hub_client, store)

    assert third is not None
    assert generations(store) == {results[1].generation, third.generation}  # type: ignore[union-attr]


def test_max_models_caps_what_is_indexed_and_requested(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    result = index(spec_for(fake_hub, max_models=60), hub_client, store)

    assert result is not None
    assert served_ids(store) == listed_order(fake_hub)[:60]
    assert len(fake_hub.listing_pages()) == 3  # 25 + 25 + the 10 taken from a third page
    assert fake_hub.count("resolve") <= 60
    assert len(fake_hub.size_requests()) <= 60  # sizes, too, only for what is kept


def test_max_models_below_a_chunk_asks_the_hub_for_no_more(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    index(spec_for(fake_hub, max_models=7), hub_client, store)

    assert len(served_ids(store)) == 7
    assert fake_hub.requests("api")[0].params("limit") == ["7"]
    assert len(fake_hub.listing_pages()) == 1


def test_parameter_filters_keep_models_in_range_and_drop_unknown_counts(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    unknown = make_model("llama", 500)
    unknown.safetensors = None
    unknown.config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    fake_hub.add(unknown)
    index(spec_for(fake_hub, name="all"), hub_client, store)
    everything = served(store, "all")

    index(spec_for(fake_hub, min_parameters=5_000_000_000, max_parameters=10_000_000_000), hub_client, store)

    sized = {record.id: record.resources.parameter_count for record in everything}
    expected = [
        model_id
        for model_id, count in sized.items()
        if count is not None and 5_000_000_000 <= count <= 10_000_000_000
    ]
    assert sized[unknown.id] is None
    assert expected
    assert served_ids(store) == expected
    assert any(count is not None and count < 5_000_000_000 for count in sized.values())
    assert any(count is not None and count > 10_000_000_000 for count in sized.values())


def test_two_sources_with_overlapping_models_are_kept_apart(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    everything = index(spec_for(fake_hub, name="everything"), hub_client, store)
    llamas = index(spec_for(fake_hub, name="llamas", authors=("meta-llama",)), hub_client, store)

    assert everything is not None
    assert llamas is not None
    llama_ids = served_ids(store, "llamas")
    assert llama_ids
    assert set(llama_ids) < set(served_ids(store, "everything"))
    assert {record.source for record in served(store, "llamas")} == {"llamas"}
    assert {record.source for record in served(store, "everything")} == {"everything"}
    assert read_manifest(store, "everything") == everything.manifest
    assert all(info.key.startswith("catalog/llamas/") for info in store.list("catalog/llamas/"))
    assert store.head(manifest_key("everything")) is not None


def test_resume_after_a_crash_between_chunk_write_and_checkpoint_matches_an_uninterrupted_pass(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    uninterrupted = index(spec_for(fake_hub, name="reference"), hub_client, store)
    assert uninterrupted is not None
    persisted: list[Checkpoint] = []

    def crash_on_third(checkpoint: Checkpoint) -> None:
        if len(persisted) == 2:
            raise Crash
        persisted.append(checkpoint)

    with pytest.raises(Crash):
        index(spec_for(fake_hub), hub_client, store, hook=crash_on_third)
    # The third chunk is on disk although its checkpoint never was.
    third_chunk = generation_prefix("hf", persisted[-1].generation) + chunk_name(
        persisted[-1].processed_models
    )
    assert store.head(third_chunk) is not None

    resumed = index(spec_for(fake_hub), hub_client, store, resume=persisted[-1])

    assert resumed is not None
    assert resumed.generation == persisted[-1].generation
    assert comparable(served(store)) == [
        {**record, "source": "hf"} for record in comparable(served(store, "reference"))
    ]
    lines = stored_lines(store, "hf", resumed.generation)
    assert len(lines) == len(set(lines)) == resumed.models == uninterrupted.models


def test_a_hub_error_mid_pass_keeps_the_previous_generation_served_and_the_checkpoint_usable(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    first = index(spec_for(fake_hub), hub_client, store)
    assert first is not None
    checkpoints: list[Checkpoint] = []
    fake_hub.error_next(100, status=503, bucket="api", after=2)  # the third page fails

    with pytest.raises(ProviderUnavailable):
        index(spec_for(fake_hub), hub_client, store, checkpoints=checkpoints)
    assert len(checkpoints) == 2
    assert read_manifest(store, "hf") == first.manifest
    assert served_ids(store) == listed_order(fake_hub)

    fake_hub.clear_faults()
    resumed = index(spec_for(fake_hub), hub_client, store, resume=checkpoints[-1])

    assert resumed is not None
    assert resumed.generation == checkpoints[-1].generation != first.generation
    assert served_ids(store) == listed_order(fake_hub)


def test_a_rate_limit_mid_page_stops_the_pass_with_the_hub_wait(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    checkpoints: list[Checkpoint] = []
    fake_hub.rate_limit_next(1, retry_after="42", bucket="resolve")

    with pytest.raises(ProviderRateLimited) as raised:
        index(spec_for(fake_hub), hub_client, store, checkpoints=checkpoints)

    assert raised.value.retry_after == 42
    assert checkpoints == []  # the page whose configs failed is not written or checkpointed
    assert list(store.list("catalog/")) == []


def test_should_stop_ends_the_pass_without_flipping_and_its_checkpoint_resumes(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    checkpoints: list[Checkpoint] = []

    stopped = index(
        spec_for(fake_hub),
        hub_client,
        store,
        checkpoints=checkpoints,
        should_stop=lambda: len(checkpoints) == 3,
    )

    assert stopped is None
    assert read_manifest(store, "hf") is None
    assert checkpoints[-1].processed_models == 75

    resumed = index(spec_for(fake_hub), hub_client, store, resume=checkpoints[-1])

    assert resumed is not None
    assert resumed.generation == checkpoints[-1].generation
    assert served_ids(store) == listed_order(fake_hub)


def test_a_checkpoint_of_the_served_generation_starts_a_fresh_pass(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    checkpoints: list[Checkpoint] = []
    first = index(spec_for(fake_hub), hub_client, store, checkpoints=checkpoints)
    assert first is not None

    again = index(spec_for(fake_hub), hub_client, store, resume=checkpoints[1])

    assert again is not None
    assert again.generation != first.generation
    assert served_ids(store) == listed_order(fake_hub)


@pytest.mark.parametrize(
    "cursor", ["not a cursor", "https://huggingface.co/api/models?cursor=x", "7:0:", "0:99:"]
)
def test_a_checkpoint_that_does_not_fit_starts_a_fresh_pass(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore, cursor: str
) -> None:
    resume = Checkpoint(generation="20260101T000000Z-abcdef", cursor=cursor, processed_models=50)

    result = index(spec_for(fake_hub), hub_client, store, resume=resume)

    assert result is not None
    assert result.generation != resume.generation
    assert served_ids(store) == listed_order(fake_hub)


def test_a_checkpoint_whose_chunks_are_gone_starts_a_fresh_pass(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    checkpoints: list[Checkpoint] = []
    index(
        spec_for(fake_hub),
        hub_client,
        store,
        checkpoints=checkpoints,
        should_stop=lambda: len(checkpoints) == 2,
    )
    store.delete_prefix(generation_prefix("hf", checkpoints[-1].generation))

    result = index(spec_for(fake_hub), hub_client, store, resume=checkpoints[-1])

    assert result is not None
    assert result.generation != checkpoints[-1].generation
    assert served_ids(store) == listed_order(fake_hub)


def test_a_model_listed_by_two_queries_is_stored_once(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub, libraries=("sentence-transformers", "transformers"))

    result = index(spec, hub_client, store)

    assert result is not None
    expected = {model.id for model in fake_hub.models if not model.gated and "transformers" in model.tags}
    assert any("sentence-transformers" in model.tags for model in fake_hub.models)
    lines = stored_lines(store, "hf", result.generation)
    assert set(served_ids(store)) == expected
    assert len(lines) == result.models == len(expected)


def test_several_queries_share_max_models(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    spec = spec_for(fake_hub, pipeline_tags=("text-generation", "sentence-similarity"), max_models=20)

    index(spec, hub_client, store)

    per_tag = collections.Counter(record.metadata.pipeline_tag for record in served(store))
    assert per_tag == {"sentence-similarity": 10, "text-generation": 10}


def test_gated_models_are_indexed_with_config_facts_when_included_with_a_token(
    fake_hub: FakeHub, store: DirectoryStore
) -> None:
    gated = [model for model in fake_hub.models if model.gated and model.family != "odd"]
    assert gated
    with HubClient(endpoint=fake_hub.url, token="hf_token", retry_wait=0) as client:
        index(spec_for(fake_hub, include_gated=True, token="hf_token"), client, store)

    records = {record.id: record for record in served(store)}
    assert all(records[model.id].resources.layers is not None for model in gated)
    assert {records[model.id].metadata.gated for model in gated} <= {Gated.AUTO, Gated.MANUAL}


def test_gated_models_without_a_token_cost_no_resolver_request(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    index(spec_for(fake_hub, include_gated=True), hub_client, store)

    gated_ids = {model.id for model in fake_hub.models if model.gated}
    records = {record.id: record for record in served(store)}
    assert gated_ids <= set(records)
    # The listing's safetensors summary still sizes them.
    assert all(
        records[model.id].resources.parameter_count is not None
        for model in fake_hub.models
        if model.gated and model.family != "odd"
    )
    assert not any(
        request.path.split("/resolve/")[0].lstrip("/") in gated_ids
        for request in fake_hub.requests("resolve")
    )


def test_only_repositories_with_a_config_json_cost_a_resolver_request(
    fake_hub: FakeHub, hub_client: HubClient, store: DirectoryStore
) -> None:
    index(spec_for(fake_hub), hub_client, store)

    indexed = {model.id: model for model in fake_hub.models if not model.gated}
    with_config = {model_id for model_id, model in indexed.items() if "config.json" in model.files}
    assert len(with_config) < len(indexed)  # GGUF-only repositories exist
    requested = [request.path.split("/resolve/")[0].lstrip("/") for request in fake_hub.requests("resolve")]
    assert sorted(requested) == sorted(with_config)


def test_odd_repositories_never_fail_a_pass(store: DirectoryStore) -> None:
    odd = [make_model("odd", index) for index in range(40)]
    with FakeHub(odd) as hub, HubClient(endpoint=hub.url, token=None, retry_wait=0) as client:
        result = index(spec_for(hub, chunk_size=10), client, store)

        assert result is not None
        assert sorted(served_ids(store)) == sorted(model.id for model in odd if not model.gated)


@pytest.fixture
def corpus_hub() -> Iterator[FakeHub]:
    with FakeHub(make_corpus(60, seed=11)) as hub:
        yield hub


def test_an_empty_listing_serves_an_empty_generation(corpus_hub: FakeHub, store: DirectoryStore) -> None:
    with HubClient(endpoint=corpus_hub.url, token=None) as client:
        result = index(spec_for(corpus_hub, authors=("nobody",)), client, store)

    assert result is not None
    assert result.models == 0
    assert result.manifest.chunks == ()
    assert served_ids(store) == []
