"""The inventory pass against the API emulator (Models, the ledger Secret) and a directory store."""

from __future__ import annotations

import datetime
import hashlib
import logging
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from ai_models.adapters.kube.ledger_store import Change, SecretLedgerStore
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.objectstore import DirectoryStore, ObjectStoreError
from ai_models.controller.accounting import Accounting
from ai_models.controller.storage.inventory import InventoryPass
from ai_models.controller.storage.metrics import StorageMetrics
from ai_models.domain.artifacts.layout import artifact_prefix, file_key, manifest_key, upload_payload_key
from ai_models.domain.artifacts.manifest import (
    ArtifactFile,
    ArtifactManifest,
    ArtifactSource,
    manifest_to_json,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage import ledger as algebra
from ai_models.domain.storage.ledger import EntryState, Owner, Scope
from ai_models.names import ModelKind, SourceType

NAMESPACE = "d8-ai-models"
GROUP, VERSION = "ai.deckhouse.io", "v1alpha1"


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class FailingReads:
    """A real directory store whose reads of one key fail, as a bucket with a broken object would."""

    def __init__(self, store: DirectoryStore, *, failing_key: str) -> None:
        self._store = store
        self._failing_key = failing_key
        self.description = store.description

    def get_bytes(self, key: str) -> bytes:
        if key == self._failing_key:
            raise ObjectStoreError(f"cannot read {key!r} ({self.description}): injected read failure")
        return self._store.get_bytes(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class World:
    def __init__(self, api: Any, store: DirectoryStore, root: Path) -> None:
        self.api = api
        self.store = store
        self.root = root
        self.objects = k8s.CustomObjectsApi(api)
        self.ledger = SecretLedgerStore(api, namespace=NAMESPACE)
        self.accounting = Accounting(self.ledger, capacity_bytes=None)
        self.jobs: list[dict[str, Any]] = []
        self.now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
        self.registry = CollectorRegistry()
        self.metrics = StorageMetrics(self.registry)
        core = k8s.CoreV1Api(api)
        for name in (NAMESPACE, "team-a"):
            core.create_namespace({"metadata": {"name": name}})

    def inventory(
        self, *, grace: datetime.timedelta = datetime.timedelta(0), max_removal_fraction: float = 0.5
    ) -> InventoryPass:
        return InventoryPass(
            store=self.store,
            objects=ModelObjects(self.api),
            accounting=self.accounting,
            job_cache=lambda: self.jobs,
            grace=grace,
            max_removal_fraction=max_removal_fraction,
            metrics=self.metrics,
            clock=lambda: self.now,
        )

    def delete_model(self, name: str, *, kind: ModelKind = ModelKind.MODEL) -> None:
        """Gone without the finalizer's cleanup, as after a restart that lost the API objects."""
        if kind is ModelKind.MODEL:
            self.objects.delete_namespaced_custom_object(GROUP, VERSION, "team-a", "models", name)
        else:
            self.objects.delete_cluster_custom_object(GROUP, VERSION, "clustermodels", name)

    def sample(self, name: str) -> float:
        return self.registry.get_sample_value(name) or 0.0

    def model(
        self, name: str, *, phase: str, digest: str | None = None, kind: ModelKind = ModelKind.MODEL
    ) -> Owner:
        body: dict[str, Any] = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind.value,
            "metadata": {"name": name},
            "spec": {"source": {"upload": {}}},
        }
        status: dict[str, Any] = {"phase": phase}
        if digest is not None:
            status["artifact"] = {"uri": "file:///x", "digest": digest, "sizeBytes": 1}
        if kind is ModelKind.MODEL:
            created = self.objects.create_namespaced_custom_object(GROUP, VERSION, "team-a", "models", body)
            self.objects.patch_namespaced_custom_object_status(
                GROUP, VERSION, "team-a", "models", name, {"status": status}
            )
        else:
            created = self.objects.create_cluster_custom_object(GROUP, VERSION, "clustermodels", body)
            self.objects.patch_cluster_custom_object_status(
                GROUP, VERSION, "clustermodels", name, {"status": status}
            )
        meta = created["metadata"]
        return Owner(kind=kind.value, namespace=meta.get("namespace") or "", name=name, uid=meta["uid"])

    def artifact(
        self, owner: Owner, digest: str, files: dict[str, bytes], *, with_manifest: bool = True
    ) -> int:
        entries = []
        for path, data in files.items():
            info = self.store.put_bytes(file_key(owner, digest, path), data)
            entries.append(
                ArtifactFile(
                    path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest(), etag=info.etag
                )
            )
        if with_manifest:
            manifest = ArtifactManifest(
                owner=owner,
                digest=digest,
                source=ArtifactSource(type=SourceType.UPLOAD, upload_sha256="00" * 32),
                files=tuple(entries),
                resolved={"format": "GGUF"},
                published_at="2026-11-29T00:00:00Z",
            )
            self.store.put_bytes(manifest_key(owner, digest), manifest_to_json(manifest))
        return sum(info.size for info in self.store.list(artifact_prefix(owner, digest)))

    def stored_artifact_bytes(self) -> int:
        return sum(info.size for info in self.store.list("artifacts/"))


@pytest.fixture
def world(kube_emulator: Any, kube_api_client: Any, tmp_path: Path) -> World:
    return World(kube_api_client, DirectoryStore(tmp_path / "store"), tmp_path / "store")


def test_clean_pass_confirms_a_ledger_that_matches_the_stored_bytes_exactly(world: World) -> None:
    llama_digest, phi_digest = digest_of("llama"), digest_of("phi")
    llama = world.model("llama", phase="Ready", digest=llama_digest)
    phi = world.model("phi", phase="Ready", digest=phi_digest, kind=ModelKind.CLUSTER_MODEL)
    llama_bytes = world.artifact(llama, llama_digest, {"model.gguf": b"G" * 1000, "README.md": b"hi"})
    phi_bytes = world.artifact(phi, phi_digest, {"model.safetensors": b"S" * 700})
    gone = Owner(kind="Model", namespace="team-a", name="deleted", uid="0000")
    world.artifact(gone, digest_of("gone"), {"model.gguf": b"x" * 50})
    world.artifact(llama, digest_of("dead-job"), {"model.gguf": b"y" * 10}, with_manifest=False)

    first = world.inventory().run()
    assert first.clean, first.errors
    assert first.removed == []  # one observation is never enough
    waiting = world.ledger.read().ledger
    assert waiting is not None
    assert waiting.bytes_in(EntryState.PUBLISHED) == world.stored_artifact_bytes()

    result = world.inventory().run()

    assert result.clean, result.errors
    assert sorted(result.removed) == sorted(
        [artifact_prefix(gone, digest_of("gone")), artifact_prefix(llama, digest_of("dead-job"))]
    )
    stored = world.ledger.read().ledger
    assert stored is not None
    assert stored.confirmed
    published = {entry.owner.name: entry for entry in stored.entries if entry.state is EntryState.PUBLISHED}
    assert published["llama"].size_bytes == llama_bytes
    assert published["llama"].scope is Scope.NAMESPACED
    assert published["phi"].size_bytes == phi_bytes
    assert published["phi"].scope is Scope.CLUSTER
    assert stored.bytes_in(EntryState.PUBLISHED) == world.stored_artifact_bytes()
    assert result.damaged == []


def test_an_artifact_that_cannot_be_read_is_reported_the_rest_is_accounted_and_nothing_confirmed(
    world: World,
) -> None:
    good_digest, bad_digest = digest_of("good"), digest_of("bad")
    good = world.model("good", phase="Ready", digest=good_digest)
    bad = world.model("bad", phase="Ready", digest=bad_digest)
    good_bytes = world.artifact(good, good_digest, {"model.gguf": b"G" * 300})
    world.artifact(bad, bad_digest, {"model.gguf": b"B" * 200})
    world.store = FailingReads(world.store, failing_key=manifest_key(bad, bad_digest))  # type: ignore[assignment]

    result = world.inventory().run()

    assert not result.clean
    assert len(result.errors) == 1
    assert artifact_prefix(bad, bad_digest) in result.errors[0]
    stored = world.ledger.read().ledger
    assert stored is not None
    assert not stored.confirmed
    assert [(entry.owner.name, entry.size_bytes) for entry in stored.entries] == [("good", good_bytes)]


def test_missing_or_replaced_files_and_missing_artifacts_are_reported_as_damage(world: World) -> None:
    replaced_digest, missing_digest = digest_of("replaced"), digest_of("missing")
    replaced = world.model("replaced", phase="Ready", digest=replaced_digest)
    missing_file = world.model("missing-file", phase="Ready", digest=missing_digest)
    world.model("vanished", phase="Ready", digest=digest_of("vanished"))
    world.artifact(replaced, replaced_digest, {"model.gguf": b"A" * 100})
    world.artifact(missing_file, missing_digest, {"model.gguf": b"A" * 100, "tokenizer.json": b"{}"})
    # Same size, new object: only the store's version token tells.
    path = world.root / file_key(replaced, replaced_digest, "model.gguf")
    path.unlink()
    world.store.put_bytes(file_key(replaced, replaced_digest, "model.gguf"), b"Z" * 100)
    world.store.delete(file_key(missing_file, missing_digest, "tokenizer.json"))

    result = world.inventory().run()

    damaged = dict(result.damaged)
    assert set(damaged) == {
        ModelKey(ModelKind.MODEL, "team-a", "replaced"),
        ModelKey(ModelKind.MODEL, "team-a", "missing-file"),
        ModelKey(ModelKind.MODEL, "team-a", "vanished"),
    }
    assert "replaced after publication" in damaged[ModelKey(ModelKind.MODEL, "team-a", "replaced")]
    assert "tokenizer.json is missing" in damaged[ModelKey(ModelKind.MODEL, "team-a", "missing-file")]
    assert "missing from the object store" in damaged[ModelKey(ModelKind.MODEL, "team-a", "vanished")]
    assert result.clean  # damage is found and accounted; it is not an error of the pass


def test_reservations_survive_only_for_objects_still_being_published(world: World) -> None:
    publishing = world.model("publishing", phase="Publishing")
    ready_digest = digest_of("ready")
    ready = world.model("ready", phase="Ready", digest=ready_digest)
    world.artifact(ready, ready_digest, {"model.gguf": b"R" * 10})
    gone = Owner(kind="Model", namespace="team-a", name="gone", uid="1111")
    partial_digest = digest_of("partial")
    world.artifact(publishing, partial_digest, {"model.gguf": b"P" * 40}, with_manifest=False)
    world.jobs = [
        {
            "metadata": {
                "name": f"publish-{publishing.uid}",
                "labels": {"ai.deckhouse.io/owner-uid": publishing.uid},
                "annotations": {"ai.deckhouse.io/artifact-digest": partial_digest},
            },
            "status": {"active": 1},
        }
    ]
    ledger = None
    for owner, size in ((publishing, 500), (ready, 10), (gone, 77)):
        ledger = algebra.reserve(
            ledger, owner=owner, scope=Scope.NAMESPACED, size_bytes=size, capacity_bytes=None
        ).ledger
    world.accounting.store.update(lambda _current: Change(ledger))
    world.store.put_bytes(upload_payload_key(gone), b"u" * 5)

    world.inventory().run()
    assert world.store.head(upload_payload_key(gone)) is not None  # one pass only records it
    result = world.inventory().run()

    assert result.clean, result.errors
    stored = world.ledger.read().ledger
    assert stored is not None
    reserved = {
        entry.owner.name: entry.size_bytes for entry in stored.entries if entry.state is EntryState.RESERVED
    }
    assert reserved == {"publishing": 500}
    assert world.store.head(file_key(publishing, partial_digest, "model.gguf")) is not None  # being written
    assert list(world.store.list("uploads/")) == []  # nobody will publish the upload of a deleted Model


HOUR = datetime.timedelta(hours=1)


def test_objects_gone_with_the_store_intact_lose_nothing_on_the_first_pass_nor_within_the_grace_period(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    kept_digest, model_digest, cluster_digest = digest_of("kept"), digest_of("model"), digest_of("cluster")
    kept = world.model("kept", phase="Ready", digest=kept_digest)
    model = world.model("restarted", phase="Ready", digest=model_digest)
    cluster = world.model("shared", phase="Ready", digest=cluster_digest, kind=ModelKind.CLUSTER_MODEL)
    world.artifact(kept, kept_digest, {"model.gguf": b"K" * 3000})
    model_bytes = world.artifact(model, model_digest, {"model.gguf": b"M" * 400})
    cluster_bytes = world.artifact(cluster, cluster_digest, {"model.gguf": b"C" * 500})
    world.delete_model("restarted")
    world.delete_model("shared", kind=ModelKind.CLUSTER_MODEL)
    stored_before = world.stored_artifact_bytes()

    grace = 24 * HOUR
    first = world.inventory(grace=grace).run()
    world.now += 23 * HOUR
    within = world.inventory(grace=grace).run()

    assert first.removed == within.removed == []
    assert world.stored_artifact_bytes() == stored_before
    assert {item.owner.name for item in within.orphaned} == {"restarted", "shared"}
    assert world.sample("d8_ai_models_storage_inventory_orphaned_artifacts") == 2
    assert world.sample("d8_ai_models_storage_inventory_orphaned_bytes") == model_bytes + cluster_bytes
    ledger = world.ledger.read().ledger
    assert ledger is not None
    assert ledger.confirmed
    assert ledger.bytes_in(EntryState.PUBLISHED) == stored_before  # what waits is still counted
    assert {(item.uid, item.since) for item in ledger.absences} == {
        (model.uid, world.now - 23 * HOUR),
        (cluster.uid, world.now - 23 * HOUR),
    }

    world.now += HOUR
    caplog.set_level(logging.INFO, logger="ai_models.controller.storage.inventory")
    after = world.inventory(grace=grace).run()  # a new pass object: a controller restart meanwhile

    assert sorted(after.removed) == sorted(
        [artifact_prefix(model, model_digest), artifact_prefix(cluster, cluster_digest)]
    )
    assert world.store.head(manifest_key(kept, kept_digest)) is not None
    assert world.sample("d8_ai_models_storage_inventory_removed_artifacts_total") == 2
    assert world.sample("d8_ai_models_storage_inventory_removed_bytes_total") == model_bytes + cluster_bytes
    assert world.sample("d8_ai_models_storage_inventory_orphaned_artifacts") == 0
    removals = [r for r in caplog.records if r.getMessage() == "inventory pass removed what no object owns"]
    assert {(r.object, r.uid, r.digest, r.bytes) for r in removals} == {  # type: ignore[attr-defined]
        ("Model team-a/restarted", model.uid, model_digest, model_bytes),
        ("ClusterModel shared", cluster.uid, cluster_digest, cluster_bytes),
    }
    ledger = world.ledger.read().ledger
    assert ledger is not None
    assert ledger.absences == ()
    assert ledger.bytes_in(EntryState.PUBLISHED) == world.stored_artifact_bytes()


def test_a_lost_ledger_starts_the_wait_anew(world: World) -> None:
    kept_digest, gone_digest = digest_of("kept"), digest_of("gone")
    kept = world.model("kept", phase="Ready", digest=kept_digest)
    gone = world.model("gone", phase="Ready", digest=gone_digest)
    world.artifact(kept, kept_digest, {"model.gguf": b"K" * 3000})
    world.artifact(gone, gone_digest, {"model.gguf": b"G" * 300})
    world.delete_model("gone")

    world.inventory(grace=HOUR).run()
    k8s.CoreV1Api(world.api).delete_namespaced_secret("ai-models-storage-accounting", NAMESPACE)
    world.now += 2 * HOUR
    assert world.inventory(grace=HOUR).run().removed == []  # first seen again now
    world.now += HOUR
    assert world.inventory(grace=HOUR).run().removed == [artifact_prefix(gone, gone_digest)]


def test_a_recreated_object_with_the_same_name_and_a_new_uid_does_not_own_the_old_artifact(
    world: World,
) -> None:
    old_digest = digest_of("old")
    old = world.model("llama", phase="Ready", digest=old_digest)
    world.artifact(old, old_digest, {"model.gguf": b"O" * 100})
    world.artifact(
        world.model("big", phase="Ready", digest=digest_of("big")), digest_of("big"), {"w": b"B" * 900}
    )
    world.delete_model("llama")
    new = world.model("llama", phase="WaitForUpload")
    assert new.uid != old.uid

    first = world.inventory(grace=HOUR).run()

    assert first.removed == []
    assert [(item.owner.name, item.uid) for item in first.orphaned] == [("llama", old.uid)]
    ledger = world.ledger.read().ledger
    assert ledger is not None
    published = {entry.owner.uid for entry in ledger.entries if entry.state is EntryState.PUBLISHED}
    assert old.uid in published
    assert new.uid not in published

    world.now += HOUR
    assert world.inventory(grace=HOUR).run().removed == [artifact_prefix(old, old_digest)]


def test_an_artifact_written_again_for_a_live_object_is_no_longer_waited_on(world: World) -> None:
    digest = digest_of("same")
    old = world.model("llama", phase="Ready", digest=digest)
    world.artifact(old, digest, {"model.gguf": b"O" * 100})
    world.artifact(
        world.model("big", phase="Ready", digest=digest_of("big")), digest_of("big"), {"w": b"B" * 900}
    )
    world.delete_model("llama")
    world.inventory(grace=HOUR).run()
    new = world.model("llama", phase="Ready", digest=digest)
    world.artifact(new, digest, {"model.gguf": b"N" * 100})  # the same digest published for it

    world.now += 2 * HOUR
    result = world.inventory(grace=HOUR).run()

    assert result.removed == []
    assert result.orphaned == []
    ledger = world.ledger.read().ledger
    assert ledger is not None
    assert ledger.absences == ()


def test_a_pass_that_would_remove_most_of_the_store_at_once_removes_nothing_and_reports_it(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    owners = []
    for name in ("a", "b", "c"):
        digest = digest_of(name)
        owner = world.model(name, phase="Ready", digest=digest)
        world.artifact(owner, digest, {"model.gguf": name.encode() * 200})
        owners.append((owner, digest))
    world.artifact(
        world.model("small", phase="Ready", digest=digest_of("s")), digest_of("s"), {"w": b"s" * 10}
    )
    for owner, _digest in owners:
        world.delete_model(owner.name)
    stored_before = world.stored_artifact_bytes()

    world.inventory(grace=HOUR).run()
    world.now += 2 * HOUR
    caplog.set_level(logging.ERROR, logger="ai_models.controller.storage.inventory")
    result = world.inventory(grace=HOUR).run()

    assert result.removed == []
    assert result.blocked
    assert result.clean  # usage is known: the ledger still counts every byte
    assert world.stored_artifact_bytes() == stored_before
    assert world.sample("d8_ai_models_storage_inventory_removal_blocked") == 1
    assert world.sample("d8_ai_models_storage_inventory_orphaned_artifacts") == 3
    assert world.sample("d8_ai_models_storage_inventory_removed_artifacts_total") == 0
    held = [r for r in caplog.records if "held back removals" in r.getMessage()]
    assert len(held) == 1
    assert held[0].held_count == 3  # type: ignore[attr-defined]
    ledger = world.ledger.read().ledger
    assert ledger is not None
    assert ledger.confirmed
    assert len(ledger.absences) == 3

    # Below the threshold (here: raised by the administrator) the held removals go at once.
    result = world.inventory(grace=HOUR, max_removal_fraction=1.0).run()
    assert sorted(result.removed) == sorted(artifact_prefix(owner, digest) for owner, digest in owners)
    assert world.sample("d8_ai_models_storage_inventory_removal_blocked") == 0
