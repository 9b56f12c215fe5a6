"""The inventory pass and the catalog indexes of deleted ModelCatalogSources (emulator, directory store)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.ledger_store import SecretLedgerStore
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.objectstore import DirectoryStore
from ai_models.api.catalog.index import CatalogIndex
from ai_models.api.catalog.index_builder import IndexBuilder
from ai_models.api.metrics import ApiMetrics
from ai_models.catalog.layout import (
    CatalogManifest,
    chunk_key,
    chunk_name,
    manifest_key,
    source_prefix,
    withdrawn_manifest_key,
)
from ai_models.controller.accounting import Accounting
from ai_models.controller.storage.catalogs import CatalogSweep
from ai_models.controller.storage.inventory import InventoryPass, InventoryResult
from ai_models.domain.catalog.record import CatalogRecord, ProviderMetadata, ResourceFacts
from ai_models.domain.storage.ledger import Absence

NAMESPACE = "d8-ai-models"
GROUP, VERSION, PLURAL = "ai.deckhouse.io", "v1alpha1", "modelcatalogsources"
START = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


class ShortList:
    """The API server's sources, but a list that comes back without any (a cache, a proxy, a restore)."""

    def __init__(self, real: CatalogSourceObjects) -> None:
        self.real = real

    def names(self) -> set[str]:
        return set()

    def exists(self, name: str) -> bool:
        return self.real.exists(name)


class BrokenList(ShortList):
    def names(self) -> set[str]:
        raise KubeError(
            verb="list", kind="ModelCatalogSource", name="", namespace="", status=0, message="ConnectionError"
        )


class World:
    def __init__(self, api: Any, store: DirectoryStore) -> None:
        self.api = api
        self.store = store
        self.objects = k8s.CustomObjectsApi(api)
        self.ledger = SecretLedgerStore(api, namespace=NAMESPACE)
        self.accounting = Accounting(self.ledger, capacity_bytes=None)
        self.sources: Any = CatalogSourceObjects(api)
        self.now = START
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})

    def inventory(self, *, grace: datetime.timedelta = datetime.timedelta(0)) -> InventoryResult:
        return InventoryPass(
            store=self.store,
            objects=ModelObjects(self.api),
            accounting=self.accounting,
            job_cache=list,
            grace=grace,
            catalogs=CatalogSweep(store=self.store, sources=self.sources, grace=grace),
            clock=lambda: self.now,
        ).run()

    def create_source(self, name: str) -> None:
        self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ModelCatalogSource",
                "metadata": {"name": name},
                "spec": {"provider": "HuggingFace", "huggingFace": {}},
            },
        )

    def index(self, source: str, generation: str, ids: list[str]) -> bytes:
        """A served generation of `source`, as a completed pass leaves it; returns its manifest."""
        records = [
            CatalogRecord(
                source=source,
                id=model_id,
                provider="HuggingFace",
                metadata=ProviderMetadata(author=model_id.split("/")[0]),
                resources=ResourceFacts(),
                indexedAt=START,
            )
            for model_id in ids
        ]
        body = "".join(record.to_json() + "\n" for record in records).encode()
        self.store.put_bytes(chunk_key(source, generation, 0), body)
        manifest = CatalogManifest(
            source=source, generation=generation, models=len(ids), chunks=(chunk_name(0),), completedAt=START
        ).model_dump_json(by_alias=True)
        self.store.put_bytes(manifest_key(source), manifest.encode())
        return manifest.encode()

    def keys(self, source: str) -> set[str]:
        return {
            info.key.removeprefix(source_prefix(source)) for info in self.store.list(source_prefix(source))
        }

    def absences(self) -> list[Absence]:
        ledger = self.ledger.read().ledger
        return list(ledger.absences) if ledger is not None else []


@pytest.fixture
def world(kube_emulator: Any, kube_api_client: Any, tmp_path: Path) -> World:
    return World(kube_api_client, DirectoryStore(tmp_path / "store"))


def test_a_deleted_sources_index_stops_being_served_at_once_and_is_removed_only_by_a_later_pass(
    world: World,
) -> None:
    world.create_source("kept")
    kept = world.index("kept", "g1", ["acme/a", "acme/b"])
    world.index("gone", "g1", ["acme/c"])  # its source was deleted while no controller ran

    first = world.inventory()

    assert first.clean, first.errors
    assert first.catalogs is not None
    assert first.catalogs.withdrawn == ["gone"]
    assert first.catalogs.removed == []  # one pass never removes
    assert world.keys("gone") == {"withdrawn-manifest.json", "generations/g1/chunk-000000000.jsonl"}
    assert [(item.prefix, item.uid, item.since) for item in world.absences()] == [
        ("catalog/gone/", "", START)
    ]
    assert world.store.get_bytes(manifest_key("kept")) == kept

    world.now = START + datetime.timedelta(minutes=1)
    second = world.inventory()

    assert second.clean, second.errors
    assert second.catalogs is not None
    assert second.catalogs.removed == ["catalog/gone/"]
    assert second.catalogs.removed_bytes > 0
    assert world.keys("gone") == set()
    assert world.absences() == []
    assert world.store.get_bytes(manifest_key("kept")) == kept
    ledger = world.ledger.read().ledger
    assert ledger is not None
    assert ledger.confirmed


def test_the_index_waits_for_the_grace_period_across_passes(world: World) -> None:
    world.index("gone", "g1", ["acme/c"])
    grace = datetime.timedelta(hours=24)
    world.inventory(grace=grace)
    world.now = START + datetime.timedelta(hours=23)
    waiting = world.inventory(grace=grace)
    assert waiting.catalogs is not None
    assert waiting.catalogs.waiting == ["gone"]
    assert waiting.catalogs.removed == []
    assert [item.since for item in world.absences()] == [START]  # the first sighting, not this one

    world.now = START + datetime.timedelta(hours=24)
    due = world.inventory(grace=grace)
    assert due.catalogs is not None
    assert due.catalogs.removed == ["catalog/gone/"]
    assert world.keys("gone") == set()


def test_a_list_that_misses_an_existing_source_withdraws_nothing(world: World) -> None:
    world.create_source("hf")
    manifest = world.index("hf", "g1", ["acme/a"])
    world.sources = ShortList(world.sources)

    for _ in range(3):
        result = world.inventory()
        assert result.catalogs is not None
        assert result.catalogs.withdrawn == []

    assert world.store.get_bytes(manifest_key("hf")) == manifest
    assert world.absences() == []


def test_a_source_that_returns_within_the_grace_period_is_served_again(world: World) -> None:
    manifest = world.index("back", "g1", ["acme/a"])
    world.inventory()
    assert world.store.head(manifest_key("back")) is None

    world.create_source("back")  # restored, or created again under its name
    result = world.inventory()

    assert result.catalogs is not None
    assert result.catalogs.restored == ["back"]
    assert world.store.get_bytes(manifest_key("back")) == manifest
    assert world.store.head(withdrawn_manifest_key("back")) is None
    assert world.absences() == []


def test_a_returned_source_that_already_served_a_new_generation_keeps_it(world: World) -> None:
    world.index("back", "g1", ["acme/a"])
    world.inventory()
    world.create_source("back")
    newer = world.index("back", "g2", ["acme/b"])  # its first pass completed before the next look

    result = world.inventory()

    assert result.catalogs is not None
    assert result.catalogs.restored == []
    assert world.store.get_bytes(manifest_key("back")) == newer
    assert world.store.head(withdrawn_manifest_key("back")) is None


def test_sources_that_cannot_be_listed_keep_their_waits_and_leave_the_ledger_confirmed(world: World) -> None:
    world.index("gone", "g1", ["acme/c"])
    world.inventory()
    recorded = world.absences()
    world.sources = BrokenList(world.sources)
    world.now = START + datetime.timedelta(days=2)

    result = world.inventory()

    assert result.clean  # the ledger's accounting did not depend on it
    assert result.catalogs is not None
    assert result.catalogs.errors
    assert "cannot list the ModelCatalogSources" in result.catalogs.errors[0]
    assert result.catalogs.removed == []
    assert world.absences() == recorded
    assert "generations/g1/chunk-000000000.jsonl" in world.keys("gone")


def test_an_api_replica_stops_serving_a_withdrawn_source_at_its_next_poll(world: World) -> None:
    world.create_source("kept")
    world.index("kept", "g1", ["acme/a"])
    world.index("gone", "g1", ["acme/c"])
    index = CatalogIndex()
    try:
        builder = IndexBuilder(store=world.store, index=index, metrics=ApiMetrics())
        assert builder.poll_once()
        assert [row.name for row in index.sources()] == ["gone", "kept"]

        world.inventory()  # withdraws, removes nothing yet
        assert builder.poll_once()

        assert [row.name for row in index.sources()] == ["kept"]
        assert index.entry("gone", "acme/c") is None
    finally:
        index.close()
