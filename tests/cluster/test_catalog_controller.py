"""The controller indexes ModelCatalogSources for real: its process, the emulator, a fake Hub, a store."""

from __future__ import annotations

import collections
import datetime
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from cluster.catalog_stack import CatalogStack, catalog_stack
from fakes.hub import LISTING_PAGES, FakeHub, FakeModel
from fakes.hub_corpus import make_corpus

client: Any = typed_client
CORPUS = 230


def listed(hub: FakeHub) -> list[str]:
    """What a source with default filters indexes: every model that is not gated."""
    return sorted(model.id for model in hub.models if not model.gated)


__all__ = ["catalog_stack"]  # the `stack` fixture


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return make_corpus(CORPUS, seed=7)


def served(stack: CatalogStack, name: str) -> bool:
    return stack.condition(name, "Ready").get("reason") == "CatalogServed"


def test_source_without_opt_in_never_reaches_the_provider(stack: CatalogStack) -> None:
    controller = stack.controller()
    stack.create_source("quiet", opted_in=False)
    stack.eventually(
        lambda: stack.condition("quiet", "Ready").get("reason") == "WaitingForOptIn", what="waiting status"
    )
    assert stack.condition("quiet", "Indexing")["status"] == "False"
    assert stack.hub.count() == 0
    stack.annotate("quiet", {"ai.deckhouse.io/catalog-sync": "Enabled"})
    stack.eventually(lambda: served(stack, "quiet"), what="the first pass after the opt-in")
    assert sorted(stack.served_ids("quiet")) == listed(stack.hub)
    source = stack.source("quiet")
    assert source["status"]["indexedModels"] == len(listed(stack.hub))
    assert "resume" not in source["status"]
    assert stack.events("IndexingSucceeded")
    assert controller.terminate() == 0


def test_leader_killed_mid_pass_is_resumed_by_the_next_leader_without_loss_or_duplicates(
    stack: CatalogStack,
) -> None:
    stack.hub.set_latency(0.3)  # pages slow enough to kill the leader between two of them
    first = stack.controller("controller-a")
    stack.create_source(
        "big", opted_in=True, spec={"provider": "HuggingFace", "huggingFace": {}, "chunkSize": 20}
    )
    stack.eventually(
        lambda: stack.source("big").get("status", {}).get("resume", {}).get("processedModels", 0) >= 40,
        what="two checkpoints",
    )
    first.kill()
    checkpoint = stack.source("big")["status"]["resume"]
    second = stack.controller("controller-b")
    stack.eventually(lambda: served(stack, "big"), timeout=60, what="the resumed pass to complete")
    ids = stack.served_ids("big")
    assert sorted(set(ids)) == listed(stack.hub)
    assert [item for item, count in collections.Counter(ids).items() if count > 1] == []
    assert stack.source("big")["status"]["servedGeneration"] == checkpoint["generation"]
    assert stack.events("IndexingResumed")
    assert second.terminate() == 0


def test_two_sources_with_overlapping_models_are_kept_apart(stack: CatalogStack) -> None:
    stack.controller()
    authors = sorted({model.id.split("/")[0] for model in stack.hub.models})
    stack.create_source("everything", opted_in=True)
    stack.create_source(
        "one-author", opted_in=True, spec={"provider": "HuggingFace", "huggingFace": {"authors": authors[:1]}}
    )
    stack.eventually(lambda: served(stack, "everything") and served(stack, "one-author"), what="both sources")
    everything, one_author = set(stack.served_ids("everything")), set(stack.served_ids("one-author"))
    assert one_author
    assert one_author < everything
    assert all(model_id.startswith(authors[0] + "/") for model_id in one_author)


def test_failing_source_keeps_serving_its_last_generation(stack: CatalogStack) -> None:
    stack.controller()
    stack.create_source("flaky", opted_in=True)
    stack.eventually(lambda: served(stack, "flaky"), what="the first pass")
    generation = stack.manifest("flaky")["generation"]  # type: ignore[index]
    stack.hub.error_next(1000, status=503)
    stack.request_sync("flaky")
    stack.eventually(
        lambda: stack.condition("flaky", "Indexing").get("reason") == "ProviderUnavailable",
        what="the failure",
    )
    ready = stack.condition("flaky", "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "CatalogServed")
    assert stack.manifest("flaky")["generation"] == generation  # type: ignore[index]
    assert stack.events("IndexingFailed")
    stack.hub.clear_faults()
    stack.eventually(
        lambda: stack.condition("flaky", "Indexing").get("reason") == "Succeeded", what="recovery"
    )
    assert stack.manifest("flaky")["generation"] != generation  # type: ignore[index]


def test_rate_limit_is_honoured_and_the_pass_resumes(stack: CatalogStack) -> None:
    stack.controller()
    stack.hub.rate_limit_next(1, retry_after="2", bucket=LISTING_PAGES, after=1)
    stack.create_source("limited", opted_in=True)
    stack.eventually(
        lambda: stack.condition("limited", "Indexing").get("reason") == "ProviderRateLimited",
        what="the rate limit to show",
    )
    limited_at = datetime.datetime.now(datetime.UTC)
    stack.eventually(lambda: served(stack, "limited"), timeout=30, what="the pass after Retry-After")
    assert datetime.datetime.now(datetime.UTC) - limited_at >= datetime.timedelta(seconds=1)
    assert sorted(stack.served_ids("limited")) == listed(stack.hub)


def test_deleting_a_source_removes_its_index(stack: CatalogStack) -> None:
    stack.controller()
    stack.create_source("gone", opted_in=True)
    stack.eventually(lambda: served(stack, "gone"), what="the first pass")
    stack.objects.delete_cluster_custom_object("ai.deckhouse.io", "v1alpha1", "modelcatalogsources", "gone")
    stack.eventually(
        lambda: not (stack.store_dir / "catalog" / "gone").exists(),
        timeout=60,
        what="the index to be removed",
    )


def _lease_holder(stack: CatalogStack) -> str | None:
    coordination = client.CoordinationV1Api(stack.emulator.api_client())
    try:
        lease = coordination.read_namespaced_lease("ai-models-controller", "d8-ai-models")
    except ApiException:
        return None
    holder: str | None = lease.spec.holder_identity
    return holder


def test_of_two_replicas_exactly_one_reconciles_and_the_other_takes_over(stack: CatalogStack) -> None:
    first, second = stack.controller("replica-a"), stack.controller("replica-b")
    stack.eventually(lambda: _lease_holder(stack) in {"replica-a", "replica-b"}, what="a leader")
    leader, follower = (first, second) if _lease_holder(stack) == "replica-a" else (second, first)
    stack.create_source("shared", opted_in=True)
    stack.eventually(lambda: served(stack, "shared"), what="the pass")
    assert "acquired the lease" in leader.log()
    assert "acquired the lease" not in follower.log()
    assert leader.terminate() == 0
    follower.wait_for_log("acquired the lease", timeout=20)
    assert _lease_holder(stack) == follower.log_path.stem


def test_leader_that_loses_its_lease_exits_cleanly(stack: CatalogStack) -> None:
    controller = stack.controller("replica-a")
    stack.eventually(lambda: _lease_holder(stack) == "replica-a", what="leadership")
    coordination = client.CoordinationV1Api(stack.emulator.api_client())
    for _attempt in range(20):
        # The leader renews every second; retry our write until it lands between two renewals.
        lease = coordination.read_namespaced_lease("ai-models-controller", "d8-ai-models")
        lease.spec.holder_identity = "intruder"
        try:
            coordination.replace_namespaced_lease("ai-models-controller", "d8-ai-models", lease)
            break
        except ApiException as conflict:
            if conflict.status != 409:
                raise
    else:
        raise AssertionError("could not take the lease over")
    controller.wait_until(lambda: not controller.running(), timeout=20, what="exit after losing the lease")
    assert controller.terminate() == 0
    assert "lost the lease" in controller.log()


def test_a_cursor_the_provider_rejects_is_dropped_and_the_pass_starts_over(stack: CatalogStack) -> None:
    stack.controller()
    stack.hub.fail_next(1, status=400, bucket=LISTING_PAGES, after=1)
    stack.create_source("stale", opted_in=True)
    stack.eventually(
        lambda: stack.condition("stale", "Indexing").get("reason") == "ProviderRequestRejected",
        what="the rejected cursor",
    )
    stack.eventually(lambda: served(stack, "stale"), what="a fresh pass")
    assert sorted(stack.served_ids("stale")) == listed(stack.hub)


def test_deleting_a_source_in_the_middle_of_a_pass_stops_it_and_removes_everything(
    stack: CatalogStack,
) -> None:
    stack.hub.set_latency(0.3)
    controller = stack.controller()
    stack.create_source(
        "busy", opted_in=True, spec={"provider": "HuggingFace", "huggingFace": {}, "chunkSize": 20}
    )
    stack.eventually(
        lambda: stack.source("busy").get("status", {}).get("resume", {}).get("processedModels", 0) >= 20,
        what="the pass to be under way",
    )
    stack.objects.delete_cluster_custom_object("ai.deckhouse.io", "v1alpha1", "modelcatalogsources", "busy")
    stack.eventually(
        lambda: not (stack.store_dir / "catalog" / "busy").exists(),
        timeout=60,
        what="the index to be removed",
    )
    assert "cancelled" not in controller.log()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError:
        return 0, ""  # not listening yet


def test_probes_and_metrics_of_leader_and_follower(stack: CatalogStack) -> None:
    leader = stack.controller("replica-a")
    stack.eventually(lambda: _lease_holder(stack) == "replica-a", what="leadership")
    follower = stack.controller("replica-b")
    stack.create_source("measured", opted_in=True)
    stack.eventually(lambda: served(stack, "measured"), what="the pass")
    ports = {
        "leader-health": leader.health_port(),
        "leader-metrics": leader.metrics_port(),
        "follower-health": follower.health_port(),
        "follower-metrics": follower.metrics_port(),
    }
    for role in ("leader", "follower"):
        health = f"http://127.0.0.1:{ports[role + '-health']}"

        def ready(health: str = health) -> bool:
            return _get(f"{health}/readyz")[0] == 200

        stack.eventually(ready, what=f"{role} readiness")
        assert _get(f"{health}/healthz") == (200, "ok\n")
    leader_metrics = _get(f"http://127.0.0.1:{ports['leader-metrics']}/metrics")[1]
    follower_metrics = _get(f"http://127.0.0.1:{ports['follower-metrics']}/metrics")[1]
    assert "d8_ai_models_controller_leader 1.0" in leader_metrics
    assert "d8_ai_models_controller_leader 0.0" in follower_metrics
    models = len(listed(stack.hub))
    assert f'd8_ai_models_catalog_source_indexed_models{{source="measured"}} {models}.0' in leader_metrics
    assert 'd8_ai_models_catalog_source_sync_failing{source="measured"} 0.0' in leader_metrics
    # The controller's own work: the catalog controller's queue and reconciles on the leader only.
    labels = {"controller": "catalog-sources"}
    assert _sample(leader_metrics, "d8_ai_models_controller_workqueue_depth", labels) == 0
    assert (_sample(leader_metrics, "d8_ai_models_controller_workqueue_adds_total", labels) or 0) >= 1
    assert (_sample(leader_metrics, "d8_ai_models_controller_reconcile_total", labels) or 0) >= 1
    assert (
        _sample(leader_metrics, "d8_ai_models_controller_reconcile_duration_seconds_count", labels) or 0
    ) >= 1
    assert _sample(follower_metrics, "d8_ai_models_controller_reconcile_total", labels) is None
    # Lease renewals, as both replicas count them and as the API server answered them: only the two
    # replicas update Leases. The server counts a request before its client sees the answer.
    renewals = {"verb": "update", "resource": "leases", "code": "200"}

    def counted_by_replicas() -> float:
        return sum(
            _sample(_get(f"http://127.0.0.1:{ports[role + '-metrics']}/metrics")[1], REQUESTS, renewals)
            or 0.0
            for role in ("leader", "follower")
        )

    before = counted_by_replicas()
    answered = stack.emulator.request_counts().get(("update", "leases", "200"), 0)
    after = counted_by_replicas()
    assert before >= 1
    assert before <= answered <= after + 2  # at most one renewal per replica in flight


REQUESTS = "d8_ai_models_controller_kubernetes_requests_total"


def _sample(exposition: str, name: str, labels: dict[str, str]) -> float | None:
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(key) == value for key, value in labels.items()):
                return float(sample.value)
    return None
