"""Discovery, version and OpenAPI: what the kubernetes client, DynamicClient and kubectl read first."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes import dynamic as typed_dynamic

from kubeemu.pytest_fixtures import RunningEmulator

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client
dynamic: Any = typed_dynamic


def test_version_reports_kubernetes_1_34(api: Any) -> None:
    info = client.VersionApi(api).get_code()
    assert info.major == "1"
    assert info.minor == "34"
    assert info.git_version.startswith("v1.34.")


@pytest.mark.parametrize(
    "path",
    [
        "/api",
        "/api/",
        "/apis",
        "/apis/",
        "/api/v1",
        "/api/v1/",
        "/apis/apps/v1",
        "/apis/apps/v1/",
        "/apis/example.test",
        "/apis/example.test/",
        "/version",
        "/version/",
    ],
)
def test_discovery_paths_answer_with_and_without_trailing_slash(emulator: RunningEmulator, path: str) -> None:
    status, headers, body = emulator.request("GET", path)
    assert status == 200, body
    assert headers["Content-Type"].startswith("application/json")


def test_core_and_group_discovery_carry_server_addresses(api: Any) -> None:
    versions = client.CoreApi(api).get_api_versions()
    assert versions.versions == ["v1"]
    assert versions.server_address_by_client_cidrs[0].client_cidr == "0.0.0.0/0"
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["example.test"].preferred_version.version == "v1"
    assert {v.version for v in groups["example.test"].versions} == {"v1", "v1beta1"}


def test_resource_list_describes_kinds_subresources_short_names_and_categories(
    emulator: RunningEmulator,
) -> None:
    _, _, body = emulator.request("GET", "/apis/example.test/v1")
    resources = {r["name"]: r for r in body["resources"]}
    widget = resources["widgets"]
    assert widget["kind"] == "Widget"
    assert widget["namespaced"] is True
    assert widget["shortNames"] == ["wdg"]
    assert widget["categories"] == ["example-all"]
    assert set(resources["widgets/status"]["verbs"]) == {"get", "patch", "update"}
    assert resources["gadgets"]["namespaced"] is False
    assert "gadgets/status" not in resources


def test_aggregated_discovery_lists_every_group_for_kubectl(emulator: RunningEmulator) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    status, headers, body = emulator.request("GET", "/apis", headers={"Accept": accept})
    assert status == 200
    assert "as=APIGroupDiscoveryList" in headers["Content-Type"]
    groups = {item["metadata"]["name"]: item for item in body["items"]}
    assert "" not in groups
    widgets = next(
        r for r in groups["example.test"]["versions"][0]["resources"] if r["resource"] == "widgets"
    )
    assert widgets["scope"] == "Namespaced"
    assert widgets["subresources"][0]["subresource"] == "status"
    _, _, core = emulator.request("GET", "/api", headers={"Accept": accept})
    assert [item["metadata"]["name"] for item in core["items"]] == [""]


def test_dynamic_client_discovers_and_lists_custom_and_core_resources(api: Any) -> None:
    dyn = dynamic.DynamicClient(api)
    widgets = dyn.resources.get(api_version="example.test/v1", kind="Widget")
    created = widgets.create(
        body={
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w1"},
            "spec": {"source": {"url": "https://example.test/a"}},
        },
        namespace="default",
    )
    assert created.metadata.uid
    listed = widgets.get(namespace="default")
    assert listed.kind == "WidgetList"
    assert [item.metadata.name for item in listed.items] == ["w1"]
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace").get()
    assert "default" in [n.metadata.name for n in namespaces.items]


def test_openapi_v3_declares_field_validation_on_patch_for_kubectl(emulator: RunningEmulator) -> None:
    _, _, index = emulator.request("GET", "/openapi/v3")
    url = index["paths"]["apis/example.test/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    _, _, document = emulator.request("GET", url)
    item = document["paths"]["/apis/example.test/v1/namespaces/{namespace}/widgets/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "example.test",
        "version": "v1",
        "kind": "Widget",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"] if p["in"] == "query"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    schema = document["components"]["schemas"]["test.example.v1.Widget"]
    assert schema["properties"]["spec"]["required"] == ["source"]


def test_openapi_documents_follow_crd_registration(emulator: RunningEmulator) -> None:
    _, _, before = emulator.request("GET", "/openapi/v3")
    emulator.cluster.apply(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.other.test"},
            "spec": {
                "group": "other.test",
                "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object"}},
                    }
                ],
            },
        }
    )
    _, _, after = emulator.request("GET", "/openapi/v3")
    assert "apis/other.test/v1" not in before["paths"]
    assert "apis/other.test/v1" in after["paths"]
    assert json.dumps(after).count("hash=") == len(after["paths"])
