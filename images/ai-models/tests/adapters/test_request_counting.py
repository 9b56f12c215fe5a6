"""Every request the module's clients send is counted by verb, resource and code, and the counts
agree with what the API server (the emulator's `apiserver_request_total`) says it answered."""

from __future__ import annotations

import collections
import socket
import threading
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.request_counting import NO_ANSWER_CODE, CountingApiClient, request_kind
from ai_models.adapters.kube.resources import MODELS, Resource
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator, kube_emulator, kube_emulator_factory
from kubeemu.requestinfo import parse_request

__all__ = ["kube_emulator", "kube_emulator_factory"]

NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)
CONFIG_MAPS = Resource("v1", "ConfigMap", "configmaps", namespaced=True)
Key = tuple[str, str, str]

PATHS = [
    ("GET", "/api/v1/namespaces/a/pods", "list", "pods"),
    ("GET", "/api/v1/namespaces/a/pods/p", "get", "pods"),
    ("GET", "/api/v1/pods?watch=true&resourceVersion=5", "watch", "pods"),
    ("GET", "/api/v1/watch/namespaces/a/pods", "watch", "pods"),
    ("PATCH", "/apis/ai.deckhouse.io/v1alpha1/namespaces/a/models/m/status", "patch", "models/status"),
    ("GET", "/api/v1/namespaces/a", "get", "namespaces"),
    ("PUT", "/api/v1/namespaces/a/finalize", "update", "namespaces/finalize"),
    ("GET", "/api/v1/namespaces", "list", "namespaces"),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/d8-ai-models/leases/l", "update", "leases"),
    ("DELETE", "/api/v1/namespaces/a/pods", "deletecollection", "pods"),
    ("DELETE", "/api/v1/namespaces/a/pods/p", "delete", "pods"),
    ("POST", "/apis/authentication.k8s.io/v1/tokenreviews", "create", "tokenreviews"),
    ("POST", "/api/v1/namespaces/d/serviceaccounts/s/token", "create", "serviceaccounts/token"),
    ("GET", "/version", "get", ""),
    ("GET", "/apis/apps/v1", "get", ""),
]


@pytest.mark.parametrize(("method", "path", "verb", "resource"), PATHS)
def test_a_request_is_named_as_the_api_server_names_it(
    method: str, path: str, verb: str, resource: str
) -> None:
    assert request_kind(method, f"https://10.0.0.1:6443{path}") == (verb, resource)
    # The emulator reads paths as the API server's RequestInfoFactory does: both agree.
    route, _, query = path.partition("?")
    info = parse_request(method, route, dict(pair.split("=") for pair in query.split("&")) if query else {})
    served = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    assert (info.verb, served if info.resource_request else "") == (verb, resource)


class Recorded:
    def __init__(self) -> None:
        self.counts: collections.Counter[Key] = collections.Counter()
        self._lock = threading.Lock()

    def __call__(self, verb: str, resource: str, code: str) -> None:
        with self._lock:
            self.counts[(verb, resource, code)] += 1


def delta(before: dict[Key, int], after: dict[Key, int]) -> dict[Key, int]:
    return {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}


def test_the_counts_match_what_the_api_server_answered(kube_emulator: RunningEmulator) -> None:
    recorded = Recorded()
    client = new_api_client(
        ClientOptions(retries=0), kubeconfig=str(kube_emulator.kubeconfig()), observe=recorded
    )
    outsider = kube_emulator.add_identity(Identity(name="outsider", token="outsider-token"))
    refused = new_api_client(
        ClientOptions(retries=0), kubeconfig=str(kube_emulator.kubeconfig(outsider)), observe=recorded
    )
    try:
        before = kube_emulator.request_counts()
        Objects(client, NAMESPACES).create({"metadata": {"name": "team-a"}})
        config_maps = Objects(client, CONFIG_MAPS)
        config_maps.create({"metadata": {"name": "one", "namespace": "team-a"}, "data": {"a": "1"}})
        assert config_maps.get("one", "team-a") is not None
        assert config_maps.get("missing", "team-a") is None
        config_maps.patch("one", {"data": {"a": "2"}}, namespace="team-a")
        config_maps.list_page("team-a")
        with pytest.raises(KubeError):
            Objects(refused, MODELS).list_page("team-a")
        after = kube_emulator.request_counts()
    finally:
        client.close()
        refused.close()
    expected = {
        ("create", "namespaces", "201"): 1,
        ("create", "configmaps", "201"): 1,
        ("get", "configmaps", "200"): 1,
        ("get", "configmaps", "404"): 1,
        ("patch", "configmaps", "200"): 1,
        ("list", "configmaps", "200"): 1,
        ("list", "models", "403"): 1,
    }
    assert dict(recorded.counts) == expected
    assert delta(before, after) == expected | {("get", "", "200"): 1}  # the first /metrics read


def test_a_watch_counts_once_when_it_is_opened(kube_emulator: RunningEmulator) -> None:
    recorded = Recorded()
    client = new_api_client(
        ClientOptions(retries=0), kubeconfig=str(kube_emulator.kubeconfig()), observe=recorded
    )
    try:
        core = k8s.CoreV1Api(client)
        stream = watch.Watch()
        opened = stream.stream(core.list_namespace, timeout_seconds=1, _request_timeout=(3, 5))
        events: list[Any] = list(opened)
        assert {event["type"] for event in events} == {"ADDED"}  # the namespaces there are, then the end
        assert recorded.counts == collections.Counter({("watch", "namespaces", "200"): 1})
    finally:
        client.close()


def test_a_request_without_an_answer_counts_as_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    recorded = Recorded()
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.retries = 0
    client = CountingApiClient(configuration, observe=recorded)
    try:
        with pytest.raises(KubeError) as refused:
            Objects(client, CONFIG_MAPS).get("one", "team-a")
        assert refused.value.status == 0
    finally:
        client.close()
    assert recorded.counts == collections.Counter({("get", "configmaps", NO_ANSWER_CODE): 1})
