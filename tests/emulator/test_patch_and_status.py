"""PATCH flavours and the status subresource."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.pytest_fixtures import RunningEmulator, api_status

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client

GROUP, VERSION = "example.test", "v1"


def deployment(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "a", "image": "one", "env": [{"name": "X", "value": "1"}]},
                        {"name": "b", "image": "two"},
                    ]
                },
            },
        },
    }


def test_strategic_merge_patch_merges_containers_and_env_by_name(api: Any) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("d"))
    patched = apps.patch_namespaced_deployment(
        "d",
        "default",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "a", "image": "one:2", "env": [{"name": "Y", "value": "2"}]}]
                    }
                }
            }
        },
    )
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("a", "one:2"), ("b", "two")]
    assert [(e.name, e.value) for e in containers[0].env] == [("X", "1"), ("Y", "2")]
    assert patched.metadata.generation == 2


def test_strategic_merge_patch_directives_delete_and_replace(emulator: RunningEmulator, api: Any) -> None:
    client.AppsV1Api(api).create_namespaced_deployment("default", deployment("d"))
    path = "/apis/apps/v1/namespaces/default/deployments/d"
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}},
        "metadata": {"finalizers": ["x/y"]},
    }
    status, _, body = emulator.request(
        "PATCH", path, body=patch, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, body
    assert [c["name"] for c in body["spec"]["template"]["spec"]["containers"]] == ["a"]
    replace = {
        "spec": {"selector": {"$patch": "replace", "matchLabels": {"app": "d", "v": "2"}}},
        "metadata": {"finalizers": ["x/z"]},
    }
    _, _, body = emulator.request(
        "PATCH", path, body=replace, content_type="application/strategic-merge-patch+json"
    )
    assert body["spec"]["selector"] == {"matchLabels": {"app": "d", "v": "2"}}
    assert body["metadata"]["finalizers"] == ["x/y", "x/z"]  # finalizers merge as a set


def test_strategic_merge_patch_on_custom_resource_is_415(emulator: RunningEmulator, api: Any) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "widgets",
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"source": {"url": "https://example.test/m"}},
        },
    )
    status, _, body = emulator.request(
        "PATCH",
        "/apis/example.test/v1/namespaces/default/widgets/w",
        body={"spec": {"size": 2}},
        content_type="application/strategic-merge-patch+json",
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


def test_json_merge_patch_replaces_lists_and_deletes_with_null(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "m", "labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}}
    )
    patched = core.patch_namespaced_config_map(
        "m", "default", {"metadata": {"labels": {"a": None}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.labels == {"b": "2"}


def test_json_patch_applies_operations_and_failed_test_is_422(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "j"}, "data": {"k": "v"}})
    rv = created.metadata.resource_version
    patched = core.patch_namespaced_config_map(
        "j",
        "default",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/data/n", "value": "w"},
        ],
    )
    assert patched.data == {"k": "v", "n": "w"}
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map(
            "j",
            "default",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
                {"op": "remove", "path": "/data/n"},
            ],
        )
    assert caught.value.status == 422
    assert api_status(caught.value)["reason"] == "Invalid"


def test_patch_with_stale_resource_version_is_409(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", {"metadata": {"name": "s"}})
    core.patch_namespaced_config_map("s", "default", {"data": {"a": "b"}})
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map(
            "s",
            "default",
            {"metadata": {"resourceVersion": created.metadata.resource_version}, "data": {"a": "c"}},
            _content_type="application/merge-patch+json",
        )
    assert caught.value.status == 409


def test_server_side_apply_creates_then_merges(emulator: RunningEmulator) -> None:
    path = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=test"
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: '1'\n"
    status, _, body = emulator.request(
        "PATCH", path, body=manifest, content_type="application/apply-patch+yaml"
    )
    assert status == 201, body
    status, _, body = emulator.request(
        "PATCH", path, body=manifest.replace("'1'", "'2'"), content_type="application/apply-patch+yaml"
    )
    assert (status, body["data"]) == (200, {"a": "2"})
    status, _, _ = emulator.request(
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        body=manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status == 422  # fieldManager is required for apply


def test_main_resource_writes_ignore_status(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "widgets",
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"source": {"url": "https://example.test/m"}},
            "status": {"phase": "Forged"},
        },
    )
    assert "status" not in created
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", "widgets", "w", {"spec": {"size": 2}, "status": {"phase": "Forged"}}
    )
    assert "status" not in patched
    assert patched["spec"]["size"] == 2


def test_status_writes_change_only_status(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        "widgets",
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"source": {"url": "https://example.test/m"}},
        },
    )
    current = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "widgets", "w")
    current["status"] = {"phase": "Ready"}
    current["spec"]["size"] = 9
    current["metadata"]["labels"] = {"sneaky": "yes"}
    updated = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, "default", "widgets", "w", current
    )
    assert updated["status"] == {"phase": "Ready"}
    assert updated["spec"]["size"] == 1
    assert "labels" not in updated["metadata"]
    assert updated["metadata"]["generation"] == 1
    read = custom.get_namespaced_custom_object_status(GROUP, VERSION, "default", "widgets", "w")
    assert read["status"] == {"phase": "Ready"}


def test_built_in_status_subresource_separates_pod_status(api: Any) -> None:
    core = client.CoreV1Api(api)
    pod = core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        },
    )
    assert pod.status.phase == "Pending"
    running = core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert running.status.phase == "Running"
    relabelled = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}}
    )
    assert relabelled.status.phase == "Running"


def test_status_subresource_of_resource_without_one_is_404(emulator: RunningEmulator) -> None:
    emulator.cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    )
    status, _, _ = emulator.request("GET", "/api/v1/namespaces/default/configmaps/c/status")
    assert status == 404
