"""The index follows the object store: new generations swap in whole, and only once served."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from ai_models.adapters.objectstore import DirectoryStore, ObjectStore
from ai_models.api.catalog.catalog import Catalog
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import BuilderTiming, IndexBuilder
from ai_models.api.catalog.ledger_view import LedgerReading, LedgerState, LedgerView
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import SearchPage, SearchQuery
from ai_models.catalog.layout import CatalogManifest, chunk_key, manifest_key
from ai_models.domain.catalog.record import CatalogRecord
from support.eventually import eventually

RecordMaker = Callable[..., CatalogRecord]
GenerationWriter = Callable[..., CatalogManifest]


class Harness:
    def __init__(self, store: ObjectStore, *, timing: BuilderTiming | None = None) -> None:
        self.index = CatalogIndex()
        self.metrics = ApiMetrics()
        self.builder = IndexBuilder(store=store, index=self.index, metrics=self.metrics, timing=timing)
        ledger = LedgerView(read=lambda: LedgerReading(None, LedgerState.MISSING), capacity_bytes=None)
        self.catalog = Catalog(index=self.index, ledger=ledger)

    def served(self, **params: Any) -> list[tuple[str, str, int | None]]:
        page = SearchPage.model_validate_json(self.catalog.search(SearchQuery.model_validate(params)))
        return [(e.source, e.id, e.metadata.downloads) for e in page.items]

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


@pytest.fixture
def harness(store: DirectoryStore) -> Iterator[Harness]:
    made = Harness(store)
    yield made
    made.index.close()


def test_a_new_generation_is_served_only_after_its_manifest_flips(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/old", downloads=1)]])
    assert harness.builder.poll_once()
    write_generation(store, "hf", "g2", [[make_record("hf", "a/new", downloads=2)]], flip=False)
    assert harness.builder.poll_once()
    assert harness.served() == [("hf", "a/old", 1)]
    write_generation(store, "hf", "g2", [[make_record("hf", "a/new", downloads=2)]])
    assert harness.builder.poll_once()
    assert harness.served() == [("hf", "a/new", 2)]
    assert harness.index.generations() == {"hf": "g2"}
    assert harness.metric("d8_ai_models_api_catalog_index_entries", source="hf") == 1


def test_the_old_generation_is_served_while_the_new_one_is_indexed(
    store: DirectoryStore,
    make_record: RecordMaker,
    write_generation: GenerationWriter,
    gated_store: Callable[..., Any],
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/old", downloads=1)]])
    gated = gated_store(store, gated_prefix="catalog/hf/generations/g2/")
    harness = Harness(cast(ObjectStore, gated), timing=BuilderTiming(interval_seconds=0.05))
    try:
        harness.builder.poll_once()
        write_generation(store, "hf", "g2", [[make_record("hf", "a/new", downloads=2)]])
        harness.builder.start()
        assert gated.waiting.wait(timeout=10)
        assert harness.served() == [("hf", "a/old", 1)]
        assert [s.generation for s in harness.catalog.sources().items] == ["g1"]
        gated.release.set()
        eventually(
            lambda: harness.index.generations() == {"hf": "g2"},
            timeout=10,
            interval=0.05,
            message="the index to swap in g2",
        )
        assert harness.served() == [("hf", "a/new", 2)]
    finally:
        gated.release.set()
        assert harness.builder.stop(timeout=10)
        harness.index.close()


def test_a_generation_that_cannot_be_read_leaves_the_last_one_served_and_is_retried_later(
    store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    timing = BuilderTiming(retry_base_seconds=3600)
    harness = Harness(store, timing=timing)
    try:
        write_generation(store, "hf", "g1", [[make_record("hf", "a/one", downloads=1)]])
        harness.builder.poll_once()
        write_generation(store, "hf", "g2", [[make_record("hf", "a/two")], [make_record("hf", "a/three")]])
        store.delete(chunk_key("hf", "g2", 1))  # the chunk the manifest promises is gone
        assert not harness.builder.poll_once()
        assert harness.served() == [("hf", "a/one", 1)]
        assert harness.metric("d8_ai_models_api_catalog_index_refresh_errors_total", source="hf") == 1
        assert not harness.builder.poll_once()  # still the same broken generation: backing off
        assert harness.metric("d8_ai_models_api_catalog_index_refresh_errors_total", source="hf") == 1
        write_generation(store, "hf", "g3", [[make_record("hf", "a/three", downloads=3)]])
        assert harness.builder.poll_once()  # a new generation is tried at once
        assert harness.served() == [("hf", "a/three", 3)]
    finally:
        harness.index.close()


def test_a_damaged_manifest_leaves_the_last_generation_served(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/one", downloads=1)]])
    harness.builder.poll_once()
    store.put_bytes(manifest_key("hf"), b"{not json")
    assert not harness.builder.poll_once()
    assert harness.served() == [("hf", "a/one", 1)]


def test_two_sources_with_the_same_model_are_indexed_apart(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "org/m", downloads=5)]])
    write_generation(store, "other", "x1", [[make_record("other", "org/m", downloads=7)]])
    harness.builder.poll_once()
    assert harness.served() == [("other", "org/m", 7), ("hf", "org/m", 5)]
    write_generation(store, "other", "x2", [[make_record("other", "org/m", downloads=8)]])
    harness.builder.poll_once()
    assert harness.served() == [("other", "org/m", 8), ("hf", "org/m", 5)]


def test_a_repeated_id_keeps_the_later_chunk(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    chunks = [
        [make_record("hf", "org/m", downloads=1), make_record("hf", "org/n", downloads=4)],
        [make_record("hf", "org/m", downloads=2)],
    ]
    write_generation(store, "hf", "g1", chunks)
    harness.builder.poll_once()
    assert harness.served() == [("hf", "org/n", 4), ("hf", "org/m", 2)]
    assert [s.models for s in harness.catalog.sources().items] == [2]


def test_records_the_contract_cannot_serve_are_skipped(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    chunks = [
        [
            make_record("hf", "org/kept", downloads=1),
            make_record("hf", "org/unknown-provider", provider="ModelScope"),
            make_record("elsewhere", "org/wrong-source"),
        ]
    ]
    write_generation(store, "hf", "g1", chunks)
    assert harness.builder.poll_once()
    assert harness.served() == [("hf", "org/kept", 1)]


def test_a_source_whose_catalog_is_removed_stops_being_served(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/one")]])
    write_generation(store, "gone", "g1", [[make_record("gone", "a/two")]])
    harness.builder.poll_once()
    store.delete_prefix("catalog/gone/")
    store.delete(manifest_key("hf"))  # the manifest first: the source is being deleted
    harness.builder.poll_once()
    assert harness.served() == []
    assert harness.catalog.sources().items == []
    assert harness.metric("d8_ai_models_api_catalog_index_entries", source="gone") is None


def test_the_builder_thread_completes_a_first_pass_and_stops(
    store: DirectoryStore, harness: Harness, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/one")]])
    harness.builder.start()
    assert harness.builder.first_pass_complete.wait(timeout=10)
    assert harness.index.generations() == {"hf": "g1"}
    assert harness.metric("d8_ai_models_api_catalog_index_last_successful_poll_timestamp_seconds")
    assert harness.builder.stop(timeout=5)


def test_an_index_left_by_a_previous_container_is_started_over(
    tmp_path: Any, store: DirectoryStore, make_record: RecordMaker, write_generation: GenerationWriter
) -> None:
    write_generation(store, "hf", "g1", [[make_record("hf", "a/one")]])
    first = CatalogIndex(directory=tmp_path / "index")
    IndexBuilder(store=store, index=first, metrics=ApiMetrics()).poll_once()
    # The container dies without closing its index: the file stays in the pod's emptyDir.
    second = CatalogIndex(directory=tmp_path / "index")
    try:
        assert second.generations() == {}
        IndexBuilder(store=store, index=second, metrics=ApiMetrics()).poll_once()
        assert second.generations() == {"hf": "g1"}
    finally:
        second.close()
    assert not list((tmp_path / "index").iterdir())
    first.close()
