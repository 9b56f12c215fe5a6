"""The ModelCatalogSource reconciler against the API emulator, a fake Hub and a directory store.

Most tests call `reconcile(name)` directly on an injected clock, reading the source straight from
the API; the last ones run it as the controller does: an informer, the work queue and workers.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from ai_models.adapters.hub import HubClient
from ai_models.adapters.hub.errors import (
    ProviderEndpointRefused,
    ProviderError,
    ProviderErrorReason,
    ProviderForbidden,
    ProviderInvalidResponse,
    ProviderNotFound,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import MODEL_CATALOG_SOURCES
from ai_models.adapters.kube.source_tokens import TokenSecretMissing
from ai_models.adapters.objectstore import DirectoryStore, ObjectStoreError
from ai_models.adapters.serving.listing import RemoteClusterModel, RemotePage
from ai_models.catalog.reading import iter_records, read_manifest
from ai_models.catalog.source import SourceSpec
from ai_models.controller.catalog import CatalogRuntime, CatalogSourceReconciler, catalog_controller
from ai_models.controller.catalog.passes import InvalidSourceSpec, failure_of
from ai_models.controller.catalog.reconciler import ECHO_TIMEOUT_SECONDS
from ai_models.controller.metrics import ControllerMetrics
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.secret_reads import module_secret_refusal
from ai_models.names import CATALOG_FINALIZER, CATALOG_SYNC_REQUESTED_AT_ANNOTATION
from fakes.hub import LISTING_PAGES, FakeHub, fake_hub
from fakes.hub_corpus import FakeModel, make_corpus
from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually

__all__ = ["fake_hub"]
GROUP, VERSION, PLURAL = "ai.deckhouse.io", "v1alpha1", "modelcatalogsources"
BASE_SECONDS, CAP_SECONDS = 10.0, 600.0
DAY = 24 * 3600.0
WAIT = 30.0


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(60, seed=3)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@dataclasses.dataclass
class Recorded:
    kind: str
    name: str
    namespace: str
    type_: str
    reason: str
    message: str


@dataclasses.dataclass
class Bed:
    api: Any
    hub: FakeHub
    store: DirectoryStore
    store_dir: Path
    clock: Clock
    runtime: CatalogRuntime
    events: list[Recorded]
    registry: CollectorRegistry
    informers: list[Informer] = dataclasses.field(default_factory=list)

    @property
    def objects(self) -> Any:
        return k8s.CustomObjectsApi(self.api)

    def create(self, name: str, *, opted_in: bool = True, **meta: Any) -> dict[str, Any]:
        annotations = {"ai.deckhouse.io/catalog-sync": "Enabled"} if opted_in else {}
        annotations.update(meta.pop("annotations", {}))
        spec = meta.pop("spec", None) or {"provider": "HuggingFace", "huggingFace": {}, "chunkSize": 20}
        created: dict[str, Any] = self.objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ModelCatalogSource",
                "metadata": {"name": name, "annotations": annotations, **meta},
                "spec": spec,
            },
        )
        return created

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.objects.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def source(self, name: str) -> dict[str, Any]:
        found = self.get(name)
        assert found is not None, f"{name} is gone"
        return found

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.source(name).get("status") or {})

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        for item in self.status(name).get("conditions") or []:
            if item["type"] == type_:
                return dict(item)
        return {}

    def annotate(self, name: str, annotations: Mapping[str, str | None]) -> None:
        self.objects.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, name, {"metadata": {"annotations": dict(annotations)}}
        )

    def leader(self) -> Leader:
        """A reconciler as a fresh leader has it: nothing in memory, a new informer's cache."""
        informer = Informer(self.api, MODEL_CATALOG_SOURCES)
        reconciler = CatalogSourceReconciler(
            runtime=self.runtime, get_source=lambda name: informer.get("", name)
        )

        def changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
            reconciler.keys_of(new or old or {})

        informer.add_handler(changed)
        self.informers.append(informer.start())
        assert informer.wait_synced(WAIT)
        return Leader(self, informer, reconciler)

    def reasons(self, name: str) -> list[str]:
        return [event.reason for event in self.events if event.name == name]

    def index_exists(self, name: str) -> bool:
        return (self.store_dir / "catalog" / name).exists()


@pytest.fixture
def bed(kube_emulator: RunningEmulator, fake_hub: FakeHub, tmp_path: Path) -> Iterator[Bed]:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    store = DirectoryStore(store_dir)
    clock = Clock()
    events: list[Recorded] = []
    registry = CollectorRegistry()

    def record_event(obj: Mapping[str, Any], *, type_: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        events.append(
            Recorded(str(obj["kind"]), meta["name"], str(meta.get("namespace") or ""), type_, reason, message)
        )

    def hub_for(spec: SourceSpec) -> HubClient:
        return HubClient(endpoint=spec.endpoint, token=spec.token, retry_wait=0, max_retries=1)

    settings = ControllerSettings(
        hf_endpoint=fake_hub.url,
        catalog_retry_base_seconds=BASE_SECONDS,
        catalog_retry_cap_seconds=CAP_SECONDS,
    )
    api = kube_emulator.api_client()
    runtime = CatalogRuntime(
        settings=settings,
        store=store,
        api=api,
        hub_for=hub_for,
        metrics=ControllerMetrics(registry),
        record_event=record_event,
        clock=clock,
    )
    bed = Bed(api, fake_hub, store, store_dir, clock, runtime, events, registry)
    yield bed
    for informer in bed.informers:
        informer.stop()


@dataclasses.dataclass
class Leader:
    bed: Bed
    informer: Informer
    reconciler: CatalogSourceReconciler

    def reconcile(self, name: str) -> float | None:
        """Reconcile once the informer's cache shows what the API holds (as after a watch event),
        and again once it shows what that reconcile wrote: when the source is next looked at."""
        self.settle(name)
        again = self.reconciler.reconcile(name)
        if self.reconciler.echo_pending(name) is None:
            return again
        self.settle(name)
        eventually(
            lambda: self.reconciler.echo_pending(name) is None, timeout=WAIT, message="the echo of our write"
        )
        return self.reconciler.reconcile(name)

    def settle(self, name: str) -> None:
        def version(obj: Mapping[str, Any] | None) -> str | None:
            return None if obj is None else str(obj["metadata"]["resourceVersion"])

        eventually(
            lambda: version(self.informer.get("", name)) == version(self.bed.get(name)),
            timeout=WAIT,
            message=f"the informer to show {name} as the API has it",
        )


def test_a_new_source_is_adopted_and_indexed_in_one_reconcile_and_sleeps_until_its_interval(
    bed: Bed, caplog: pytest.LogCaptureFixture
) -> None:
    bed.create("fresh")
    with caplog.at_level(logging.INFO, logger="ai_models"):
        again = bed.leader().reconcile("fresh")
    assert again == DAY
    source = bed.source("fresh")
    assert source["metadata"]["finalizers"] == [CATALOG_FINALIZER]
    assert bed.condition("fresh", "Ready")["reason"] == "CatalogServed"
    assert bed.condition("fresh", "Indexing")["reason"] == "Succeeded"
    status = source["status"]
    assert (status["failedPasses"], "retryNotBefore" in status, "resume" in status) == (0, False, False)
    assert bed.reasons("fresh") == ["IndexingStarted", "IndexingSucceeded"]
    assert {(event.kind, event.namespace, event.type_) for event in bed.events} == {
        ("ModelCatalogSource", "", "Normal")
    }
    catalog_records = [
        record for record in caplog.records if record.name.startswith("ai_models.controller.catalog")
    ]
    assert catalog_records
    assert all(getattr(record, "source", None) == "fresh" for record in catalog_records)


def test_a_source_created_under_kopf_loses_kopf_annotations_and_keeps_one_finalizer(bed: Bed) -> None:
    bed.create(
        "upgraded",
        opted_in=False,
        finalizers=[CATALOG_FINALIZER],
        annotations={
            "controller.ai.deckhouse.io/last-handled-configuration": '{"spec": {}}',
            "controller.ai.deckhouse.io/catalog_source": '{"started": "2026-11-01T00:00:00Z"}',
            "team.example.com/owner": "search",
        },
    )
    assert bed.leader().reconcile("upgraded") is None
    meta = bed.source("upgraded")["metadata"]
    assert meta["finalizers"] == [CATALOG_FINALIZER]
    assert meta["annotations"] == {"team.example.com/owner": "search"}


def test_a_source_without_opt_in_is_reported_once_and_waits_for_a_change(bed: Bed) -> None:
    bed.create("quiet", opted_in=False)
    leader = bed.leader()
    assert leader.reconcile("quiet") is None
    assert bed.condition("quiet", "Ready")["reason"] == "WaitingForOptIn"
    version = bed.source("quiet")["metadata"]["resourceVersion"]
    assert leader.reconcile("quiet") is None
    assert bed.source("quiet")["metadata"]["resourceVersion"] == version  # nothing new to write
    assert bed.hub.count() == 0
    assert bed.events == []


def test_an_opt_in_in_another_case_and_a_bad_request_are_answered_while_waiting(bed: Bed) -> None:
    """`catalog-sync=enabled` is there but is not the opt-in: the message says the value must be
    Enabled (not "add the annotation"); a request that is not a timestamp is named too."""
    bed.create(
        "lowercase",
        opted_in=False,
        annotations={
            "ai.deckhouse.io/catalog-sync": "enabled",
            "ai.deckhouse.io/catalog-sync-requested-at": "now",
        },
    )
    assert bed.leader().reconcile("lowercase") is None
    message = bed.condition("lowercase", "Indexing")["message"]
    assert bed.condition("lowercase", "Indexing")["reason"] == "WaitingForOptIn"
    assert "ai.deckhouse.io/catalog-sync is 'enabled'; the value must be exactly Enabled" in message
    assert "add the annotation" not in message
    assert "catalog-sync-requested-at='now' is not an RFC 3339 timestamp" in message
    assert bed.hub.count() == 0


def test_a_failed_pass_is_counted_in_the_status_and_a_new_leader_keeps_the_backoff(bed: Bed) -> None:
    bed.hub.error_next(1000, status=503)
    bed.create("flaky")
    assert bed.leader().reconcile("flaky") == BASE_SECONDS
    status = bed.status("flaky")
    assert status["failedPasses"] == 1
    retry_at = bed.clock.now + datetime.timedelta(seconds=BASE_SECONDS)
    assert status["retryNotBefore"] == retry_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert bed.condition("flaky", "Indexing")["reason"] == "ProviderUnavailable"
    assert bed.reasons("flaky")[-1] == "IndexingFailed"
    asked = bed.hub.count()

    bed.clock.advance(4)
    new_leader = bed.leader()
    assert new_leader.reconcile("flaky") == BASE_SECONDS - 4
    assert bed.hub.count() == asked  # still backing off: the provider is left alone

    bed.clock.advance(BASE_SECONDS)
    assert new_leader.reconcile("flaky") == 2 * BASE_SECONDS
    assert bed.status("flaky")["failedPasses"] == 2

    bed.hub.clear_faults()
    bed.clock.advance(2 * BASE_SECONDS)
    assert new_leader.reconcile("flaky") == DAY
    status = bed.status("flaky")
    assert (status["failedPasses"], "retryNotBefore" in status) == (0, False)
    assert bed.condition("flaky", "Ready")["reason"] == "CatalogServed"


def test_a_rate_limited_pass_waits_the_time_the_provider_named_not_the_backoff(bed: Bed) -> None:
    bed.hub.rate_limit_next(1, retry_after="7", bucket=LISTING_PAGES, after=1)
    bed.create("limited")
    assert bed.leader().reconcile("limited") == 7.0
    status = bed.status("limited")
    assert status["retryNotBefore"] == (bed.clock.now + datetime.timedelta(seconds=7)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert status["resume"]["processedModels"] == 20  # the page before the limit is kept
    assert bed.condition("limited", "Indexing")["reason"] == "ProviderRateLimited"
    bed.clock.advance(7)
    assert bed.leader().reconcile("limited") == DAY
    assert bed.reasons("limited") == [
        "IndexingStarted",
        "IndexingFailed",
        "IndexingResumed",
        "IndexingSucceeded",
    ]


def test_a_missing_token_secret_is_reported_and_counted(bed: Bed) -> None:
    bed.create(
        "private",
        spec={"provider": "HuggingFace", "huggingFace": {"tokenSecretRef": {"name": "hub-token"}}},
    )
    assert bed.leader().reconcile("private") == BASE_SECONDS
    indexing = bed.condition("private", "Indexing")
    assert indexing["reason"] == "TokenSecretNotFound"
    assert "hub-token" in indexing["message"]
    assert bed.status("private")["failedPasses"] == 1
    assert bed.hub.count() == 0


def test_a_source_naming_one_of_the_module_secrets_is_refused_without_reading_it(bed: Bed) -> None:
    """The signing key exists and this bed's identity could read it: the rule, not RBAC, refuses it
    (issue 28), and the Hub never sees the key as a token."""
    core = k8s.CoreV1Api(bed.api)
    namespace = bed.runtime.settings.namespace
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "ai-models-upload-signing"}, "stringData": {"token": "key"}}
    )
    bed.create(
        "borrowing",
        spec={
            "provider": "HuggingFace",
            "huggingFace": {"tokenSecretRef": {"name": "ai-models-upload-signing"}},
        },
    )
    assert bed.leader().reconcile("borrowing") == BASE_SECONDS
    indexing = bed.condition("borrowing", "Indexing")
    assert indexing["reason"] == "TokenSecretNotFound"
    refusal = module_secret_refusal("ai-models-upload-signing", field="spec.huggingFace.tokenSecretRef")
    assert refusal is not None
    assert indexing["message"].startswith(refusal + "; retrying at ")
    assert bed.hub.count() == 0


def test_a_request_annotation_that_is_not_a_timestamp_is_reported_with_one_warning(bed: Bed) -> None:
    bed.create("asked")
    leader = bed.leader()
    leader.reconcile("asked")
    asked = bed.hub.count()
    bed.annotate("asked", {CATALOG_SYNC_REQUESTED_AT_ANNOTATION: "tomorrow"})
    assert leader.reconcile("asked") == DAY
    indexing = bed.condition("asked", "Indexing")
    assert indexing["reason"] == "InvalidSyncRequest"
    assert "'tomorrow'" in indexing["message"]
    assert bed.condition("asked", "Ready")["reason"] == "CatalogServed"
    warnings = [event for event in bed.events if event.type_ == "Warning"]
    assert [event.reason for event in warnings] == ["InvalidSyncRequest"]
    version = bed.source("asked")["metadata"]["resourceVersion"]
    leader.reconcile("asked")
    assert bed.source("asked")["metadata"]["resourceVersion"] == version
    assert len([event for event in bed.events if event.type_ == "Warning"]) == 1
    assert bed.hub.count() == asked  # no pass was started for it

    bed.clock.advance(1)
    bed.annotate(
        "asked", {CATALOG_SYNC_REQUESTED_AT_ANNOTATION: bed.clock.now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    assert leader.reconcile("asked") == DAY
    assert bed.condition("asked", "Indexing")["reason"] == "Succeeded"
    assert bed.hub.count() > asked


def test_a_deleted_source_has_its_index_removed_before_its_finalizer(bed: Bed) -> None:
    bed.create("gone")
    leader = bed.leader()
    leader.reconcile("gone")
    assert bed.index_exists("gone")
    bed.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "gone")
    assert bed.source("gone")["metadata"]["deletionTimestamp"]  # held by the finalizer
    assert leader.reconcile("gone") is None
    assert not bed.index_exists("gone")
    assert bed.get("gone") is None
    assert (
        bed.registry.get_sample_value("d8_ai_models_catalog_source_indexed_models", {"source": "gone"})
        is None
    )


class BrokenStore(DirectoryStore):
    def delete_prefix(self, prefix: str) -> int:
        raise ObjectStoreError(f"cannot delete {prefix} (directory): read-only file system; check the volume")


def test_a_deleted_source_whose_index_cannot_be_removed_is_kept_by_its_finalizer(bed: Bed) -> None:
    bed.create("stuck")
    bed.leader().reconcile("stuck")
    bed.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "stuck")
    bed.runtime.store = BrokenStore(bed.store_dir)
    with pytest.raises(Exception, match="ModelCatalogSource stuck is deleted, but its index") as raised:
        bed.leader().reconcile("stuck")
    assert CATALOG_FINALIZER in str(raised.value)
    assert bed.source("stuck")["metadata"]["finalizers"] == [CATALOG_FINALIZER]


def test_a_cache_that_lags_the_reconcilers_own_write_does_not_resume_the_finished_pass(bed: Bed) -> None:
    bed.create("echo")
    stale: dict[str, Any] = {}

    def lagging(name: str) -> dict[str, Any] | None:
        # What the informer still shows right after the pass: its last checkpoint, not the success.
        return stale.get(name) or bed.get(name)

    ticks = [0.0]
    reconciler = CatalogSourceReconciler(runtime=bed.runtime, get_source=lagging, monotonic=lambda: ticks[0])
    # Decided on its own write, the reconciler looks again when it stops trusting it, not in a day.
    assert reconciler.reconcile("echo") == ECHO_TIMEOUT_SECONDS
    served = bed.source("echo")
    before = dict(served)
    before["status"] = {
        **served["status"],
        "resume": {"generation": served["status"]["servedGeneration"], "processedModels": 40},
        "lastSuccessfulSyncTime": None,
    }
    before["metadata"] = {**served["metadata"], "resourceVersion": "1"}
    stale["echo"] = before
    asked = bed.hub.count()
    ticks[0] = 4.0
    assert reconciler.reconcile("echo") == ECHO_TIMEOUT_SECONDS - 4
    assert bed.hub.count() == asked
    assert bed.reasons("echo") == ["IndexingStarted", "IndexingSucceeded"]

    # Once the informer has shown that version, the cache is what the reconciler reads.
    assert reconciler.keys_of(served) == ["echo"]
    stale.clear()
    assert reconciler.reconcile("echo") == DAY


ERRORS: dict[str, tuple[Exception, str]] = {
    "unauthorized": (ProviderUnauthorized("no", endpoint="e", status=401), ProviderErrorReason.UNAUTHORIZED),
    "forbidden": (ProviderForbidden("no", endpoint="e", status=403), ProviderErrorReason.FORBIDDEN),
    "not_found": (ProviderNotFound("no", endpoint="e", status=404), ProviderErrorReason.NOT_FOUND),
    "unavailable": (ProviderUnavailable("no", endpoint="e", status=503), ProviderErrorReason.UNAVAILABLE),
    "refused": (ProviderEndpointRefused("no", endpoint="e"), ProviderErrorReason.ENDPOINT_REFUSED),
    "rejected": (
        ProviderRequestRejected("no", endpoint="e", status=400),
        ProviderErrorReason.REQUEST_REJECTED,
    ),
    "invalid": (ProviderInvalidResponse("no", endpoint="e"), ProviderErrorReason.INVALID_RESPONSE),
    "limited": (ProviderRateLimited("no", endpoint="e", retry_after=9), ProviderErrorReason.RATE_LIMITED),
    "token": (TokenSecretMissing("no"), "TokenSecretNotFound"),
    "spec": (InvalidSourceSpec("no"), "InvalidSpec"),
    "store": (ObjectStoreError("no"), "ObjectStoreUnavailable"),
}


@pytest.mark.parametrize(("error", "reason"), ERRORS.values(), ids=ERRORS.keys())
def test_each_pass_error_has_its_reason(error: Exception, reason: str) -> None:
    failure = failure_of(error)
    assert failure.reason == reason
    assert failure.drop_checkpoint is isinstance(error, (ProviderRequestRejected, ProviderInvalidResponse))
    expected_wait = datetime.timedelta(seconds=9) if isinstance(error, ProviderRateLimited) else None
    assert failure.retry_after == expected_wait
    assert isinstance(error, ProviderError) or failure.message == "no"


# ----- as the controller runs it ----------------------------------------------------------------


@pytest.fixture
def running(bed: Bed) -> Iterator[tuple[Informer, Any]]:
    bed.runtime.clock = lambda: datetime.datetime.now(datetime.UTC)
    informer = Informer(bed.api, MODEL_CATALOG_SOURCES)
    controller = catalog_controller(bed.runtime, informer=informer, workers=2)
    informer.start()
    assert informer.wait_synced(WAIT)
    controller.start()
    yield informer, controller
    controller.stop()
    informer.stop()
    assert controller.join(WAIT)


def test_a_spec_change_ends_the_running_pass_at_its_checkpoint_and_indexes_the_new_spec(
    bed: Bed, running: tuple[Informer, Any], caplog: pytest.LogCaptureFixture
) -> None:
    bed.hub.set_latency(0.2)
    authors = sorted({model.id.split("/")[0] for model in bed.hub.models})
    with caplog.at_level(logging.INFO, logger="ai_models.controller.catalog"):
        bed.create("moving")
        eventually(
            lambda: bed.status("moving").get("resume", {}).get("processedModels", 0) >= 20,
            timeout=WAIT,
            message="the first checkpoint",
        )
        bed.objects.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, "moving", {"spec": {"huggingFace": {"authors": authors[:1]}}}
        )
        bed.hub.set_latency(0)
        eventually(
            lambda: (
                bed.condition("moving", "Ready").get("reason") == "CatalogServed"
                and bed.status("moving").get("observedGeneration") == 2
            ),
            timeout=WAIT,
            message="the pass of the new spec",
        )
    assert "indexing pass stopped at its checkpoint" in caplog.text
    assert bed.reasons("moving").count("IndexingStarted") == 2
    assert bed.reasons("moving")[-1] == "IndexingSucceeded"


def test_taking_the_opt_in_back_ends_the_running_pass_at_its_checkpoint(
    bed: Bed, running: tuple[Informer, Any]
) -> None:
    bed.hub.set_latency(0.2)
    bed.create("withdrawn")
    eventually(
        lambda: bed.status("withdrawn").get("resume", {}).get("processedModels", 0) >= 20,
        timeout=WAIT,
        message="the first checkpoint",
    )
    bed.annotate("withdrawn", {"ai.deckhouse.io/catalog-sync": None})
    eventually(
        lambda: bed.condition("withdrawn", "Indexing").get("reason") == "WaitingForOptIn",
        timeout=WAIT,
        message="the pass to stop and the source to wait",
    )
    status = bed.status("withdrawn")
    assert status["resume"]["processedModels"] >= 20  # kept for when it opts in again
    assert "servedGeneration" not in status  # the pass did not run to its end


def test_a_stopping_controller_ends_the_pass_at_its_checkpoint(
    bed: Bed, running: tuple[Informer, Any]
) -> None:
    _informer, controller = running
    bed.hub.set_latency(0.2)
    bed.create("paused")
    eventually(
        lambda: bed.status("paused").get("resume", {}).get("processedModels", 0) >= 20,
        timeout=WAIT,
        message="the first checkpoint",
    )
    controller.stop()
    assert controller.join(WAIT)
    status = bed.status("paused")
    assert status["resume"]["processedModels"] >= 20
    assert "servedGeneration" not in status
    assert bed.reasons("paused") == ["IndexingStarted"]


def test_deleting_a_source_through_the_controller_removes_it_and_its_index(
    bed: Bed, running: tuple[Informer, Any]
) -> None:
    bed.create("short-lived")
    eventually(
        lambda: bed.condition("short-lived", "Ready").get("reason") == "CatalogServed",
        timeout=WAIT,
        message="the first pass",
    )
    bed.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "short-lived")
    eventually(lambda: bed.get("short-lived") is None, timeout=WAIT, message="the source to go")
    assert not bed.index_exists("short-lived")


def test_a_write_the_informer_showed_before_the_api_answered_does_not_hide_later_changes(bed: Bed) -> None:
    created = bed.create("quick", opted_in=False)
    cache: dict[str, dict[str, Any]] = {"quick": created}
    reconciler = CatalogSourceReconciler(runtime=bed.runtime, get_source=cache.get)
    written = {**created, "metadata": {**created["metadata"], "resourceVersion": "900"}}
    # The watch event of our write reached the informer first; the API's answer came after it.
    reconciler.keys_of(written)
    reconciler._remember(written)
    changed = {**written, "metadata": {**written["metadata"], "resourceVersion": "901", "generation": 7}}
    cache["quick"] = changed
    reconciler.keys_of(changed)
    assert reconciler._current("quick") == changed


# ----- AIModels sources: another ai-models cluster's Ready ClusterModels ------------------------


AIMODELS_BLOCK: dict[str, Any] = {
    "endpoint": "https://ai-models.cluster-a.example",
    "tokenSecretRef": {"name": "cluster-a"},
}
AIMODELS_SPEC: dict[str, Any] = {"provider": "AIModels", "aiModels": AIMODELS_BLOCK, "chunkSize": 2}


class FakeRemote:
    """The other cluster's listing as the pass reads it (catalog.remote.RemoteListing)."""

    def __init__(self, names: list[str], *, error: Exception | None = None) -> None:
        self.names = names
        self.error = error
        self.specs: list[Any] = []

    def __call__(self, spec: Any) -> FakeRemote:
        self.specs.append(spec)
        return self

    def __enter__(self) -> FakeRemote:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def list_page(self, page_token: str | None, page_size: int) -> RemotePage:
        if self.error is not None:
            raise self.error
        start = int(page_token or 0)
        names = self.names[start : start + page_size]
        items = tuple(
            RemoteClusterModel(name=name, digest="sha256:" + "ab" * 32, size_bytes=100 + n, resolved={})
            for n, name in enumerate(names, start)
        )
        more = start + page_size < len(self.names)
        return RemotePage(items=items, next_page_token=str(start + page_size) if more else None)


def _remote_token(bed: Bed, value: str = "other-cluster-token") -> None:
    core = k8s.CoreV1Api(bed.api)
    namespace = bed.runtime.settings.namespace
    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as error:
        if error.status != 409:
            raise
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "cluster-a"}, "stringData": {"token": value}}
    )


def test_an_aimodels_source_indexes_the_other_clusters_cluster_models_with_its_token(bed: Bed) -> None:
    _remote_token(bed)
    remote = FakeRemote(["bge-m3", "llama", "qwen"])
    bed.runtime.remote_for = remote
    bed.create("cluster-a", spec=AIMODELS_SPEC)

    assert bed.leader().reconcile("cluster-a") == DAY

    assert bed.condition("cluster-a", "Ready")["reason"] == "CatalogServed"
    assert bed.status("cluster-a")["indexedModels"] == 3
    [spec] = remote.specs
    assert (spec.endpoint, spec.token, spec.page_size) == (
        "https://ai-models.cluster-a.example",
        "other-cluster-token",
        2,
    )
    manifest = read_manifest(bed.store, "cluster-a")
    assert manifest is not None
    records = list(iter_records(bed.store, manifest))
    assert [(r.id, r.provider, r.resources.weights_bytes) for r in records] == [
        ("bge-m3", "AIModels", 100),
        ("llama", "AIModels", 101),
        ("qwen", "AIModels", 102),
    ]
    assert bed.hub.count() == 0  # nothing went to the Hugging Face endpoint


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ProviderUnauthorized("refused the token", endpoint="e", status=401), "ProviderUnauthorized"),
        (ProviderForbidden("may not list", endpoint="e", status=403), "ProviderForbidden"),
    ],
)
def test_an_aimodels_source_whose_token_the_other_cluster_refuses_says_so(
    bed: Bed, error: Exception, reason: str
) -> None:
    _remote_token(bed)
    bed.runtime.remote_for = FakeRemote([], error=error)
    bed.create("cluster-a", spec=AIMODELS_SPEC)

    assert bed.leader().reconcile("cluster-a") == BASE_SECONDS

    indexing = bed.condition("cluster-a", "Indexing")
    assert indexing["reason"] == reason
    assert indexing["message"].startswith(str(error))
    assert bed.condition("cluster-a", "Ready")["status"] == "False"


def test_an_aimodels_source_whose_cluster_is_unreachable_says_so(bed: Bed) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _remote_token(bed)
    bed.create(
        "cluster-a",
        spec={
            **AIMODELS_SPEC,
            "aiModels": {**AIMODELS_BLOCK, "endpoint": f"http://127.0.0.1:{port}"},
        },
    )

    assert bed.leader().reconcile("cluster-a") == BASE_SECONDS

    indexing = bed.condition("cluster-a", "Indexing")
    assert indexing["reason"] == "ProviderUnavailable"
    assert f"the ai-models cluster at http://127.0.0.1:{port} is unreachable" in indexing["message"]


def test_an_aimodels_source_without_its_token_secret_names_the_aimodels_field(bed: Bed) -> None:
    bed.runtime.remote_for = FakeRemote(["never-listed"])
    bed.create("cluster-a", spec=AIMODELS_SPEC)

    assert bed.leader().reconcile("cluster-a") == BASE_SECONDS

    indexing = bed.condition("cluster-a", "Indexing")
    assert indexing["reason"] == "TokenSecretNotFound"
    assert "spec.aiModels.tokenSecretRef" in indexing["message"]
