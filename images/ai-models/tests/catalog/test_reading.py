"""Reading a served source back: one record per id, later chunk wins, damage is contained."""

from __future__ import annotations

import datetime

import pytest

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.catalog.layout import CatalogManifest, chunk_key, chunk_name, manifest_key
from ai_models.catalog.reading import ManifestInvalid, iter_records, read_manifest
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts

NOW = datetime.datetime(2026, 5, 1, 12, 0, tzinfo=datetime.UTC)
GENERATION = "20260501T120000Z-0a1b2c"


def record(model_id: str, downloads: int) -> CatalogRecord:
    return CatalogRecord(
        source="hf",
        id=model_id,
        provider="HuggingFace",
        metadata=ProviderMetadata(downloads=downloads),
        resources=ResourceFacts(),
        indexedAt=NOW,
    )


def write_chunk(store: DirectoryStore, offset: int, lines: list[str]) -> str:
    store.put_bytes(chunk_key("hf", GENERATION, offset), ("\n".join(lines) + "\n").encode())
    return chunk_name(offset)


def manifest(chunks: tuple[str, ...], models: int) -> CatalogManifest:
    return CatalogManifest(source="hf", generation=GENERATION, models=models, chunks=chunks, completedAt=NOW)


def test_a_source_that_never_completed_a_pass_has_no_manifest(store: DirectoryStore) -> None:
    assert read_manifest(store, "hf") is None


def test_the_manifest_reads_back_as_written(store: DirectoryStore) -> None:
    written = manifest((chunk_name(0),), 3)
    store.put_bytes(manifest_key("hf"), written.model_dump_json(by_alias=True).encode())

    assert read_manifest(store, "hf") == written


def test_a_damaged_manifest_is_reported_with_its_key(store: DirectoryStore) -> None:
    store.put_bytes(manifest_key("hf"), b"{not json")

    with pytest.raises(ManifestInvalid, match=r"catalog/hf/manifest\.json"):
        read_manifest(store, "hf")


def test_records_repeat_once_per_id_and_the_later_chunk_wins(store: DirectoryStore) -> None:
    first = write_chunk(store, 0, [record("a/x", 1).to_json(), record("a/y", 2).to_json()])
    second = write_chunk(store, 2, [record("a/x", 10).to_json(), record("a/z", 3).to_json()])

    records = list(iter_records(store, manifest((first, second), 3)))

    assert [(item.id, item.metadata.downloads) for item in records] == [("a/y", 2), ("a/x", 10), ("a/z", 3)]


def test_an_unreadable_line_is_skipped_and_the_rest_served(store: DirectoryStore) -> None:
    only = write_chunk(store, 0, [record("a/x", 1).to_json(), "{broken", "", record("a/y", 2).to_json()])

    assert [item.id for item in iter_records(store, manifest((only,), 2))] == ["a/x", "a/y"]
