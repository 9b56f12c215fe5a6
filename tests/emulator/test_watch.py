"""Watch streams: event types, resume from resourceVersion, expiry, bookmarks, timeouts, filtering,
and no lost events between a list and a watch started from its resourceVersion."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from kubernetes import client as typed_client
from kubernetes import watch as typed_watch

from kubeemu.pytest_fixtures import EmulatorFactory, RunningEmulator

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client
watch: Any = typed_watch


def raw_watch(emulator: RunningEmulator, path: str) -> tuple[str, Iterator[dict[str, Any]]]:
    """Open a watch with plain HTTP; returns the Content-Type and an iterator over decoded events."""
    connection = emulator.connection(timeout=10)
    connection.request("GET", path, headers={"Authorization": f"Bearer {emulator.superuser.token}"})
    response = connection.getresponse()

    def events() -> Iterator[dict[str, Any]]:
        try:
            while line := response.readline():
                yield json.loads(line)
        finally:
            connection.close()

    return response.headers["Content-Type"], events()


def test_watch_streams_added_modified_deleted_as_json_lines(emulator: RunningEmulator, api: Any) -> None:
    core = client.CoreV1Api(api)
    content_type, events = raw_watch(
        emulator, "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=5"
    )
    assert content_type == "application/json"
    core.create_namespaced_config_map("default", {"metadata": {"name": "w"}})
    core.patch_namespaced_config_map("w", "default", {"data": {"a": "b"}})
    core.delete_namespaced_config_map("w", "default")
    seen = []
    for event in events:
        seen.append((event["type"], event["object"]["metadata"]["name"], event["object"]["kind"]))
        if event["type"] == "DELETED":
            break
    assert seen == [
        ("ADDED", "w", "ConfigMap"),
        ("MODIFIED", "w", "ConfigMap"),
        ("DELETED", "w", "ConfigMap"),
    ]


def test_watch_without_resource_version_starts_with_synthetic_added(api: Any) -> None:
    core = client.CoreV1Api(api)
    for name in ("a", "b"):
        core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    names = [
        e["object"].metadata.name
        for e in watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=1)
    ]
    assert names == ["a", "b"]


def test_watch_from_resource_version_replays_later_events(api: Any) -> None:
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    core.delete_namespaced_config_map("a", "default")
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=first.metadata.resource_version,
            timeout_seconds=1,
        )
    ]
    assert events == [("ADDED", "b"), ("DELETED", "a")]


def test_watch_from_evicted_resource_version_gets_410_expired(kube_emulator_factory: EmulatorFactory) -> None:
    emulator = kube_emulator_factory(event_log_size=3)
    core = client.CoreV1Api(emulator.api_client())
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "c0"}})
    for i in range(1, 6):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    _, events = raw_watch(
        emulator,
        f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first.metadata.resource_version}",
    )
    error = next(events)
    assert error["type"] == "ERROR"
    assert (error["object"]["code"], error["object"]["reason"]) == (410, "Expired")
    assert error["object"]["message"].startswith("too old resource version")


def test_watch_honours_timeout_seconds(api: Any) -> None:
    started = time.monotonic()
    list(watch.Watch().stream(client.CoreV1Api(api).list_namespaced_config_map, "default", timeout_seconds=1))
    assert 0.9 <= time.monotonic() - started < 5


def test_bookmarks_only_when_allowed(kube_emulator_factory: EmulatorFactory) -> None:
    emulator = kube_emulator_factory(bookmark_interval=0.2)
    _, with_bookmarks = raw_watch(
        emulator, "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    kinds = [(e["type"], e["object"]["kind"]) for e in with_bookmarks]
    assert ("BOOKMARK", "ConfigMap") in kinds
    _, without = raw_watch(emulator, "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
    assert [e for e in without if e["type"] == "BOOKMARK"] == []


def test_send_initial_events_ends_with_marked_bookmark(emulator: RunningEmulator) -> None:
    emulator.cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
    )
    _, events = raw_watch(
        emulator,
        "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true"
        "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    )
    first, second = next(events), next(events)
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "x")
    assert second["type"] == "BOOKMARK"
    assert second["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_label_selector_watch_reports_objects_entering_and_leaving_the_selection(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "s", "labels": {"sel": "no"}}}
    )
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        label_selector="sel=yes",
        resource_version=created.metadata.resource_version,
        timeout_seconds=3,
    )
    core.patch_namespaced_config_map("s", "default", {"metadata": {"labels": {"sel": "yes"}}})
    core.patch_namespaced_config_map("s", "default", {"data": {"k": "v"}})
    core.patch_namespaced_config_map("s", "default", {"metadata": {"labels": {"sel": "no"}}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "unrelated", "labels": {"sel": "no"}}})
    seen = []
    for event in stream:
        seen.append(event["type"])
        if len(seen) == 3:
            break
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_field_selector_watch_on_nested_field(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    stream = watch.Watch().stream(
        core.list_namespaced_event, "default", field_selector="involvedObject.name=x", timeout_seconds=3
    )
    for target in ("y", "x"):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"generateName": "e-"},
                "reason": "R",
                "involvedObject": {"kind": "ConfigMap", "name": target},
                "message": target,
            },
        )
    event = next(iter(stream))
    assert event["object"].involved_object.name == "x"


def test_list_then_watch_from_its_resource_version_loses_nothing_under_concurrent_writes(
    emulator: RunningEmulator,
) -> None:
    total = 150
    writer_client = emulator.api_client()
    reader = client.CoreV1Api(emulator.api_client())
    expected = {f"c{i}" for i in range(total)}
    started = threading.Event()

    def write() -> None:
        core = client.CoreV1Api(writer_client)
        for i in range(total):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
            if i == 20:
                started.set()

    writer = threading.Thread(target=write)
    writer.start()
    started.wait(10)
    listed = reader.list_namespaced_config_map("default")
    listed_names = {c.metadata.name for c in listed.items}
    watched: list[str] = []
    for event in watch.Watch().stream(
        reader.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    ):
        watched.append(event["object"].metadata.name)
        if listed_names | set(watched) >= expected:
            break
    writer.join()
    assert 0 < len(listed_names) < total
    assert listed_names.isdisjoint(watched)  # nothing replayed twice
    assert len(watched) == len(set(watched))
    assert listed_names | set(watched) == expected  # nothing lost


def test_watch_of_custom_resources_in_table_form_for_kubectl(emulator: RunningEmulator) -> None:
    emulator.cluster.apply(
        {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"source": {"url": "https://example.test/m"}, "size": 3},
        }
    )
    connection = emulator.connection()
    connection.request(
        "GET",
        "/apis/example.test/v1/namespaces/default/widgets?watch=1&timeoutSeconds=1",
        headers={
            "Authorization": f"Bearer {emulator.superuser.token}",
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        },
    )
    event = json.loads(connection.getresponse().readline())
    connection.close()
    table = event["object"]
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Phase", "Size", "Ready", "Age"]
    assert table["rows"][0]["cells"][:3] == ["w", None, 3]
