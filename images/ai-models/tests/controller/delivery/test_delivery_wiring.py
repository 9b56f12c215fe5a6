"""The controller's delivery wiring from its settings, in each mode: what the leader follows (no
PersistentVolume or Job informer in NodeCache mode, the selected Nodes instead; the shared claims in
both) and what the reconciler and the webhook are told."""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.events import EventRecorder
from ai_models.adapters.kube.informer import Informer
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS
from ai_models.controller.delivery.informers import DeliveryInformers
from ai_models.controller.delivery.node_cache import NodeCacheAdmission, NodeCacheDelivery, label_selector_of
from ai_models.controller.delivery.shared_pvc import SharedPVCAdmission, SharedPVCDelivery
from ai_models.controller.delivery.wiring import attach_delivery, delivery_mode, delivery_settings
from ai_models.controller.prerequisites import read_inputs
from ai_models.controller.runtime import Manager
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.placement import NodeCacheSeen
from ai_models.domain.storage.prerequisites import PrerequisitesReason, evaluate
from ai_models.names import ModelKind

GIB = 1024**3


def node_cache_mode(monkeypatch: pytest.MonkeyPatch) -> ControllerSettings:
    """The settings as the chart sets them in NodeCache mode."""
    monkeypatch.setenv("AI_MODELS_DELIVERY_MODE", "NodeCache")
    monkeypatch.setenv("AI_MODELS_DELIVERY_NODE_CACHE_SIZE", "500Gi")
    monkeypatch.setenv("AI_MODELS_DELIVERY_NODE_CACHE_SELECTOR", '{"node-role.example.com/gpu": ""}')
    return ControllerSettings()


def attached(settings: ControllerSettings) -> Manager:
    api_client = k8s.ApiClient(k8s.Configuration())  # never called: nothing is started
    models = {
        ModelKind.MODEL: Informer(api_client, MODELS),
        ModelKind.CLUSTER_MODEL: Informer(api_client, CLUSTER_MODELS),
    }
    manager = Manager()
    attach_delivery(
        manager, api_client=api_client, settings=settings, models=models, events=EventRecorder(api_client)
    )
    return manager


def test_node_cache_settings_reach_the_reconciler_and_the_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = node_cache_mode(monkeypatch)
    api_client = k8s.ApiClient(k8s.Configuration())  # never called: nothing is started
    wanted = NodeCacheSeen(selector={"node-role.example.com/gpu": ""}, size_bytes=500 * GIB)

    mode = delivery_mode(api_client, settings)
    delivery = mode.delivery(DeliveryInformers(api_client))
    admission = mode.admission()

    assert isinstance(delivery, NodeCacheDelivery)
    assert delivery.settings == wanted
    assert isinstance(admission, NodeCacheAdmission)
    assert admission.settings == wanted
    shared = delivery_mode(api_client, ControllerSettings(delivery_mode=DeliveryMode.SHARED_PVC))
    assert isinstance(shared.delivery(DeliveryInformers(api_client)), SharedPVCDelivery)
    assert isinstance(shared.admission(), SharedPVCAdmission)


def test_the_charts_reason_for_no_node_plugin_reaches_the_rules_and_the_prerequisites(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reason = "node-driver-registrar image for Kubernetes 1.35 missing: the node plugin is not deployed"
    monkeypatch.setenv("AI_MODELS_DELIVERY_NODE_CACHE_UNAVAILABLE", reason)
    settings = node_cache_mode(monkeypatch)
    api_client = k8s.ApiClient(k8s.Configuration())  # never called: nothing is started

    mode = delivery_mode(api_client, settings)

    assert mode.admission().settings.unavailable == reason  # type: ignore[attr-defined]
    delivery = mode.delivery(DeliveryInformers(api_client))
    assert isinstance(delivery, NodeCacheDelivery)
    assert delivery.settings.unavailable == reason
    # No Node is read: the verdict is the chart's reason whatever the cluster holds.
    verdict = evaluate(read_inputs(None, settings))
    assert verdict.reason is PrerequisitesReason.NODE_CACHE_PLUGIN_NOT_DEPLOYED
    assert verdict.message == reason


def test_node_cache_mode_follows_the_selected_nodes_and_the_claims_but_no_volumes_or_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = attached(node_cache_mode(monkeypatch))

    names = sorted(informer.name for informer in manager.informers)

    assert "node-cache-nodes" in names
    assert "shared-claims" in names
    assert "delivery-volumes" not in names
    assert "materialize-jobs" not in names
    # The API server selects the Nodes: an empty value selects nodes whose label is empty.
    assert (
        label_selector_of({"node-role.example.com/gpu": "", "zone": "b"})
        == "node-role.example.com/gpu=,zone=b"
    )
    assert label_selector_of({}) is None
    assert [controller.name for controller in manager.controllers] == ["delivery"]


def test_shared_pvc_mode_follows_volumes_and_jobs_and_no_nodes() -> None:
    manager = attached(ControllerSettings(delivery_mode=DeliveryMode.SHARED_PVC))

    names = {informer.name for informer in manager.informers}

    assert {"shared-claims", "delivery-volumes", "materialize-jobs"} <= names
    assert "node-cache-nodes" not in names


@pytest.mark.parametrize("mode", list(DeliveryMode))
def test_both_modes_run_the_orphan_pass_at_the_interval_the_setting_names(
    monkeypatch: pytest.MonkeyPatch, mode: DeliveryMode
) -> None:
    monkeypatch.setenv("AI_MODELS_DELIVERY_ORPHAN_PASS_SECONDS", "120")
    settings = node_cache_mode(monkeypatch) if mode is DeliveryMode.NODE_CACHE else ControllerSettings()
    assert settings.delivery_mode is mode
    assert delivery_settings(settings).orphan_pass_interval == datetime.timedelta(minutes=2)
    assert "orphaned-claims" in attached(settings).loops


def test_a_cache_size_that_is_not_a_quantity_fails_at_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AI_MODELS_DELIVERY_NODE_CACHE_SIZE", "500 GB")

    with pytest.raises(ValueError, match="delivery_node_cache_size"):
        ControllerSettings()
