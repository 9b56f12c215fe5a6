"""Label and field selectors on lists (watches are covered in test_watch)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes.client.exceptions import ApiException

from kubeemu.pytest_fixtures import api_status
from kubeemu.selectors import parse_field_selector, parse_label_selector

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client


@pytest.fixture
def labelled(api: Any) -> client.CoreV1Api:
    core = client.CoreV1Api(api)
    for name, labels in [
        ("a", {"env": "prod", "tier": "web"}),
        ("b", {"env": "dev", "tier": "db"}),
        ("c", {"env": "prod"}),
        ("d", {"team": "x", "rank": "5"}),
    ]:
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})
    return core


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("env=prod", ["a", "c"]),
        ("env==prod", ["a", "c"]),
        ("env!=prod", ["b", "d"]),
        ("env in (dev, prod),tier", ["a", "b"]),
        ("env notin (prod)", ["b", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("rank>3", ["d"]),
        ("env=prod,!tier", ["c"]),
    ],
)
def test_label_selector_operators(labelled: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    found = [
        c.metadata.name for c in labelled.list_namespaced_config_map("default", label_selector=selector).items
    ]
    assert found == expected


def test_malformed_label_selector_is_400(labelled: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        labelled.list_namespaced_config_map("default", label_selector="env in prod")
    assert caught.value.status == 400


def test_field_selectors_on_metadata_and_nested_fields(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p2"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    core.patch_namespaced_pod_status("p2", "default", {"status": {"phase": "Running"}})
    assert [
        p.metadata.name for p in core.list_namespaced_pod("default", field_selector="metadata.name=p1").items
    ] == ["p1"]
    assert [
        p.metadata.name
        for p in core.list_namespaced_pod("default", field_selector="status.phase=Running").items
    ] == ["p2"]
    assert [
        p.metadata.name
        for p in core.list_namespaced_pod("default", field_selector="status.phase!=Running").items
    ] == ["p1"]
    assert [
        p.metadata.name
        for p in core.list_pod_for_all_namespaces(
            field_selector="metadata.namespace==default,metadata.name!=p1"
        ).items
    ] == ["p2"]


def test_custom_resources_reject_field_labels_outside_metadata(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            "example.test", "v1", "default", "widgets", field_selector="spec.size=1"
        )
    assert caught.value.status == 400
    assert api_status(caught.value)["message"] == "field label not supported: spec.size"


def test_selector_parsers_match_like_labels_parse() -> None:
    selector = parse_label_selector("a=1, b notin (x,y), !c")
    assert selector.matches({"a": "1", "b": "z"})
    assert not selector.matches({"a": "1", "b": "x"})
    assert not selector.matches({"a": "1", "c": ""})
    fields = parse_field_selector(r"metadata.name=a\,b,spec.x!=1")
    assert [(r.path, r.value, r.negate) for r in fields.requirements] == [
        ("metadata.name", "a,b", False),
        ("spec.x", "1", True),
    ]
