"""The one object client against the emulated API server: every verb on a core kind, a namespaced
custom kind and a cluster-scoped one, paging, preconditions, and one error whose text never carries
the server's words."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from ai_models.adapters.kube import ClientOptions, new_api_client
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import JSON_PATCH, Objects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS, Resource
from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]

NAMESPACE = "team-a"
NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)
CONFIG_MAPS = Resource("v1", "ConfigMap", "configmaps", namespaced=True)


@pytest.fixture
def config_maps(kube_api_client: Any) -> Objects:
    Objects(kube_api_client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    return Objects(kube_api_client, CONFIG_MAPS)


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": data,
    }


def model(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ai.deckhouse.io/v1alpha1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"source": {"upload": {}}},
    }


def test_a_core_object_is_created_read_patched_replaced_and_deleted(config_maps: Objects) -> None:
    created = config_maps.create(config_map("settings", a="1"))
    assert created is not None
    assert created["metadata"]["uid"]
    assert created["kind"] == "ConfigMap"

    assert config_maps.get("settings", NAMESPACE) == created
    assert config_maps.get("absent", NAMESPACE) is None

    patched = config_maps.patch("settings", {"data": {"b": "2"}}, NAMESPACE)
    assert patched is not None
    assert patched["data"] == {"a": "1", "b": "2"}
    json_patched = config_maps.patch(
        "settings", [{"op": "remove", "path": "/data/a"}], NAMESPACE, content_type=JSON_PATCH
    )
    assert json_patched is not None
    assert json_patched["data"] == {"b": "2"}

    replaced = config_maps.replace({**json_patched, "data": {"c": "3"}})
    assert replaced["data"] == {"c": "3"}

    assert config_maps.delete("settings", NAMESPACE) is True
    assert config_maps.get("settings", NAMESPACE) is None
    assert config_maps.delete("settings", NAMESPACE) is False, "gone already is not an error"


def test_a_create_that_finds_the_object_is_a_conflict_unless_that_is_fine(config_maps: Objects) -> None:
    config_maps.create(config_map("settings", a="1"))

    assert config_maps.create(config_map("settings", a="2"), exists_ok=True) is None
    with pytest.raises(KubeError) as refused:
        config_maps.create(config_map("settings", a="2"))
    assert refused.value.conflict
    assert refused.value.status == 409
    assert str(refused.value).startswith(
        "cannot create the ConfigMap team-a/settings: the API server answered HTTP 409"
    )
    assert (config_maps.get("settings", NAMESPACE) or {})["data"] == {"a": "1"}, (
        "the first one is left as it is"
    )


def test_a_patch_of_an_object_gone_meanwhile_is_none_only_when_the_caller_says_so(
    config_maps: Objects,
) -> None:
    assert config_maps.patch("absent", {"data": {"a": "1"}}, NAMESPACE, missing_ok=True) is None
    with pytest.raises(KubeError) as missing:
        config_maps.patch("absent", {"data": {"a": "1"}}, NAMESPACE)
    assert missing.value.not_found


def test_a_delete_with_preconditions_removes_only_the_object_they_name(config_maps: Objects) -> None:
    first = config_maps.create(config_map("settings"))
    assert first is not None
    config_maps.delete("settings", NAMESPACE)
    config_maps.create(config_map("settings"))

    assert config_maps.delete("settings", NAMESPACE, uid=first["metadata"]["uid"]) is False
    assert config_maps.get("settings", NAMESPACE) is not None, "the object made since under the name stays"
    current = config_maps.get("settings", NAMESPACE) or {}
    assert config_maps.delete("settings", NAMESPACE, resource_version=current["metadata"]["resourceVersion"])
    assert config_maps.get("settings", NAMESPACE) is None


def test_a_list_reads_every_page_and_filters_by_label(config_maps: Objects) -> None:
    for index in range(7):
        body = config_map(f"item-{index}")
        body["metadata"]["labels"] = {"parity": "even" if index % 2 == 0 else "odd"}
        config_maps.create(body)

    page = config_maps.list_page(NAMESPACE, limit=3)
    assert len(page["items"]) == 3
    assert page["metadata"].get("continue"), "the emulator pages like the API server"

    listed = list(config_maps.list_all(NAMESPACE, page_size=3))
    assert sorted(item["metadata"]["name"] for item in listed) == [f"item-{index}" for index in range(7)]
    assert {item["kind"] for item in listed} == {"ConfigMap"}
    even = list(config_maps.list_all(label_selector="parity=even", page_size=2))
    assert sorted(item["metadata"]["name"] for item in even) == ["item-0", "item-2", "item-4", "item-6"]


def test_namespaced_and_cluster_scoped_custom_objects_and_their_status(kube_api_client: Any) -> None:
    Objects(kube_api_client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    models = Objects(kube_api_client, MODELS)
    cluster_models = Objects(kube_api_client, CLUSTER_MODELS)
    models.create(model("llama"))
    cluster_body = model("shared")
    del cluster_body["metadata"]["namespace"]
    cluster_models.create({**cluster_body, "kind": "ClusterModel"})

    patched = models.patch("llama", {"status": {"phase": "Pending"}}, NAMESPACE, subresource="status")
    assert patched is not None
    assert patched["status"]["phase"] == "Pending"
    assert (models.get("llama", NAMESPACE) or {})["status"]["phase"] == "Pending"
    assert (cluster_models.get("shared") or {})["kind"] == "ClusterModel"
    assert [item["metadata"]["name"] for item in models.list_all()] == ["llama"]
    assert [item["metadata"]["name"] for item in cluster_models.list_all()] == ["shared"]


def test_an_invalid_object_names_the_fields_but_never_the_servers_text(kube_api_client: Any) -> None:
    Objects(kube_api_client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    bad = model("llama")
    bad["spec"] = {"source": {"upload": {}, "catalog": {"sourceName": "hub"}}}

    with pytest.raises(KubeError) as refused:
        Objects(kube_api_client, MODELS).create(bad)

    error = refused.value
    assert error.status == 422
    assert error.reason == "Invalid"
    assert not error.temporary
    assert error.fields, "the invalid fields are named"
    assert error.message, "the Status message is kept for logs"
    assert error.message not in str(error), "the server's text never reaches the error's string"


def test_addressing_an_object_without_its_scope_is_a_programming_error(config_maps: Objects) -> None:
    with pytest.raises(ValueError, match="namespaced"):
        config_maps.get("settings")
    with pytest.raises(ValueError, match="cluster-scoped"):
        Objects(config_maps._client, CLUSTER_MODELS).get("shared", NAMESPACE)


def test_an_api_server_that_does_not_answer_is_a_temporary_error_with_no_answer(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        f"clusters: [{{name: dead, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: dead, user: {token: t}}]\n"
        "contexts: [{name: dead, context: {cluster: dead, user: dead}}]\n"
    )
    api_client = new_api_client(ClientOptions(retries=0), kubeconfig=str(kubeconfig))
    try:
        with pytest.raises(KubeError) as unanswered:
            Objects(api_client, CONFIG_MAPS, timeout=(1.0, 1.0)).get("settings", NAMESPACE)
    finally:
        api_client.close()
    error = unanswered.value
    assert error.status == 0
    assert error.unavailable
    assert error.temporary
    assert str(error) == (
        f"cannot get the ConfigMap {NAMESPACE}/settings: the API server did not answer ({error.message})"
    )
