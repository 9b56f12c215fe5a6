"""The controller's one Event recorder against the emulated API server: where Events land, what
`kubectl describe` finds, and repeats counted on one Event."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.events import EventRecorder
from ai_models.names import CLUSTER_EVENTS_NAMESPACE, EVENTS_COMPONENT
from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]

NAMESPACE = "team-a"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


def model(namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "Model" if namespace else "ClusterModel",
        "metadata": {"name": "qwen", "namespace": namespace, "uid": "u-1", "resourceVersion": "7"},
    }


@pytest.fixture
def core(kube_api_client: Any) -> k8s.CoreV1Api:
    api = k8s.CoreV1Api(kube_api_client)
    api.create_namespace({"metadata": {"name": NAMESPACE}})
    return api


def events(core: k8s.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    return list(core.list_namespaced_event(namespace, field_selector=selector).items)


def test_an_event_of_a_namespaced_object_lives_in_its_namespace_from_the_controller(
    core: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    EventRecorder(kube_api_client).record(model(), type_="Normal", reason="PublicationStarted", message="go")
    [event] = events(core, NAMESPACE, "involvedObject.name=qwen,involvedObject.kind=Model")
    assert event.involved_object.namespace == NAMESPACE
    assert event.involved_object.uid == "u-1"
    assert event.source.component == EVENTS_COMPONENT
    assert event.reporting_component == EVENTS_COMPONENT
    assert (event.type, event.reason, event.message, event.count) == ("Normal", "PublicationStarted", "go", 1)


def test_an_event_of_a_cluster_scoped_object_is_found_where_kubectl_describe_looks(
    core: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    EventRecorder(kube_api_client).record(model(""), type_="Warning", reason="PublicationFailed", message="x")
    # kubectl describe of a cluster-scoped object lists Events of every namespace whose
    # involvedObject has the object's name, kind, uid and an empty namespace.
    found = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=qwen,involvedObject.namespace=,involvedObject.kind=ClusterModel"
    ).items
    assert [(event.metadata.namespace, event.reason) for event in found] == [
        (CLUSTER_EVENTS_NAMESPACE, "PublicationFailed")
    ]


def test_a_repeat_within_the_window_counts_on_one_event_and_a_later_one_starts_another(
    core: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    clock = Clock()
    recorder = EventRecorder(kube_api_client, clock=clock)
    for _ in range(3):
        recorder.record(model(), type_="Warning", reason="PublicationFailed", message="same")
        clock.now += datetime.timedelta(minutes=1)
    recorder.record(model(), type_="Warning", reason="PublicationFailed", message="other")
    found = events(core, NAMESPACE, "involvedObject.name=qwen")
    assert sorted((event.message, event.count) for event in found) == [("other", 1), ("same", 3)]
    clock.now += datetime.timedelta(minutes=20)
    recorder.record(model(), type_="Warning", reason="PublicationFailed", message="same")
    counts = sorted(event.count for event in events(core, NAMESPACE, "involvedObject.name=qwen"))
    assert counts == [1, 1, 3]


def test_an_event_deleted_meanwhile_is_written_anew(core: k8s.CoreV1Api, kube_api_client: Any) -> None:
    recorder = EventRecorder(kube_api_client)
    recorder.record(model(), type_="Normal", reason="UploadWaiting", message="waiting")
    [event] = events(core, NAMESPACE, "involvedObject.name=qwen")
    core.delete_namespaced_event(event.metadata.name, NAMESPACE)
    recorder.record(model(), type_="Normal", reason="UploadWaiting", message="waiting")
    [again] = events(core, NAMESPACE, "involvedObject.name=qwen")
    assert again.count == 1


def test_an_unreachable_api_server_never_fails_the_caller() -> None:
    configuration = k8s.Configuration(host="https://127.0.0.1:9")
    configuration.retries = 0
    recorder = EventRecorder(k8s.ApiClient(configuration), timeout=(0.5, 0.5))
    recorder.record(model(), type_="Normal", reason="UploadWaiting", message="lost")
