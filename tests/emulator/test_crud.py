"""Create/read/update/delete semantics of the generic registry, for core and custom resources."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.pytest_fixtures import RunningEmulator, api_status

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client

GROUP, VERSION = "example.test", "v1"


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.test/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"source": {"url": "https://example.test/m"}, **spec},
    }


def status_of(exc: ApiException) -> dict[str, Any]:
    return api_status(exc)


def test_initial_namespaces_exist(api: Any) -> None:
    names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    # A new cluster's namespaces, as kube-apiserver creates them; platform ones (Deckhouse's) are
    # the test bed's to add.
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_created_object_gets_uid_timestamp_generation_and_resource_version(api: Any) -> None:
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    second = core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    assert re.fullmatch(r"[0-9a-f-]{36}", first.metadata.uid)
    assert first.metadata.creation_timestamp is not None
    assert first.metadata.namespace == "default"
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    assert core.read_namespaced_config_map("a", "default").data == {"k": "v"}


def test_lists_carry_kind_api_version_and_resource_version(emulator: RunningEmulator) -> None:
    emulator.cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    )
    _, _, body = emulator.request("GET", "/api/v1/namespaces/default/configmaps")
    assert body["kind"] == "ConfigMapList"
    assert body["apiVersion"] == "v1"
    assert int(body["metadata"]["resourceVersion"]) >= int(body["items"][0]["metadata"]["resourceVersion"])
    _, _, widgets = emulator.request("GET", "/apis/example.test/v1/widgets")
    assert (widgets["kind"], widgets["apiVersion"]) == ("WidgetList", "example.test/v1")


def test_duplicate_create_is_409_already_exists(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", {"metadata": {"name": "dup"}})
    assert caught.value.status == 409
    status = status_of(caught.value)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'configmaps "dup" already exists'
    assert status["details"] == {"name": "dup", "kind": "configmaps"}


def test_missing_object_is_404_with_group_in_message(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, "default", "widgets", "nope"
        )
    status = status_of(caught.value)
    assert (caught.value.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == 'widgets.example.test "nope" not found'


def test_object_in_missing_namespace_is_404_namespace_not_found(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).create_namespaced_config_map("ghost", {"metadata": {"name": "x"}})
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'namespaces "ghost" not found'


def test_stale_resource_version_is_409_conflict(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"v": "1"}})
    core.patch_namespaced_config_map("c", "default", {"data": {"v": "2"}})
    created.data = {"v": "3"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("c", "default", created)
    status = status_of(caught.value)
    assert (caught.value.status, status["reason"]) == (409, "Conflict")
    assert status["message"].startswith(
        'Operation cannot be fulfilled on configmaps "c": the object has been modified'
    )


def test_replace_with_current_resource_version_succeeds_and_bumps_it(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "r"}, "data": {"v": "1"}})
    created.data = {"v": "2"}
    replaced = core.replace_namespaced_config_map("r", "default", created)
    assert replaced.data == {"v": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert replaced.metadata.uid == created.metadata.uid


def test_noop_update_keeps_resource_version(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "same"}, "data": {"v": "1"}})
    again = core.replace_namespaced_config_map("same", "default", created)
    assert again.metadata.resource_version == created.metadata.resource_version


def test_custom_resource_replace_without_resource_version_is_invalid(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "widgets", widget("w"))
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(
            GROUP, VERSION, "default", "widgets", "w", widget("w", size=2)
        )
    assert caught.value.status == 422
    assert "metadata.resourceVersion" in status_of(caught.value)["message"]


def test_generate_name_appends_five_random_characters(api: Any) -> None:
    core = client.CoreV1Api(api)
    made = {
        core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}}).metadata.name
        for _ in range(3)
    }
    assert len(made) == 3
    assert all(re.fullmatch(r"gen-[bcdfghjklmnpqrstvwxz2456789]{5}", name) for name in made)


def test_generation_counts_spec_changes_only_for_custom_resources(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", "widgets", widget("g"))
    assert created["metadata"]["generation"] == 1
    labelled = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", "widgets", "g", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 1
    statused = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", "widgets", "g", {"status": {"phase": "Ready"}}
    )
    assert statused["metadata"]["generation"] == 1
    resized = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", "widgets", "g", {"spec": {"size": 4}}
    )
    assert resized["metadata"]["generation"] == 2


def test_cluster_scoped_custom_resource_crud(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": "example.test/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1"},
        "spec": {"color": "red", "extra": {"kept": True}},
    }
    created = custom.create_cluster_custom_object(GROUP, VERSION, "gadgets", body)
    assert "namespace" not in created["metadata"]
    assert created["spec"]["extra"] == {"kept": True}
    listed = custom.list_cluster_custom_object(GROUP, VERSION, "gadgets")
    assert [g["metadata"]["name"] for g in listed["items"]] == ["g1"]
    custom.delete_cluster_custom_object(GROUP, VERSION, "gadgets", "g1")
    assert custom.list_cluster_custom_object(GROUP, VERSION, "gadgets")["items"] == []


def test_objects_are_served_in_every_version_of_their_crd(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "gadgets",
        {"apiVersion": "example.test/v1", "kind": "Gadget", "metadata": {"name": "x"}},
    )
    beta = custom.get_cluster_custom_object(GROUP, "v1beta1", "gadgets", "x")
    assert beta["apiVersion"] == "example.test/v1beta1"


def test_all_namespaces_list_spans_namespaces(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "one"}})
    core.create_namespaced_config_map("other", {"metadata": {"name": "two"}})
    found = {(c.metadata.namespace, c.metadata.name) for c in core.list_config_map_for_all_namespaces().items}
    assert {("default", "one"), ("other", "two")} <= found


def test_limit_and_continue_page_through_a_consistent_snapshot(api: Any) -> None:
    core = client.CoreV1Api(api)
    for i in range(7):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"p{i}"}})
    first = core.list_namespaced_config_map("default", limit=3)
    assert len(first.items) == 3
    assert first.metadata.remaining_item_count == 4
    core.create_namespaced_config_map("default", {"metadata": {"name": "p9-late"}})
    names = [i.metadata.name for i in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map("default", limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
    assert names == [f"p{i}" for i in range(7)]


def test_unknown_continue_token_is_410_expired(emulator: RunningEmulator) -> None:
    token = base64.urlsafe_b64encode(json.dumps({"id": "gone", "rv": "1"}).encode()).decode()
    status, _, body = emulator.request(
        "GET", f"/api/v1/namespaces/default/configmaps?limit=1&continue={token}"
    )
    assert (status, body["reason"]) == (410, "Expired")


def test_delete_without_finalizers_answers_status_success(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "bye"}})
    answer = core.delete_namespaced_config_map("bye", "default")
    assert answer["status"] == "Success"
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("bye", "default")
    assert caught.value.status == 404


def test_invalid_name_is_422_with_rfc1123_message(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).create_namespaced_config_map("default", {"metadata": {"name": "Bad_Name"}})
    status = status_of(caught.value)
    assert caught.value.status == 422
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert "a lowercase RFC 1123 subdomain" in status["message"]


def test_dry_run_create_stores_nothing(emulator: RunningEmulator) -> None:
    status, _, _ = emulator.request(
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}},
    )
    assert status == 201
    status, _, _ = emulator.request("GET", "/api/v1/namespaces/default/configmaps/dry")
    assert status == 404
