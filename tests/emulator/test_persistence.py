"""The emulator's state saved to a file and loaded into a new emulator, as a restarted apiserver
finds etcd's: the same objects, resourceVersions continuing, the CRDs' resources served."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubeemu import errors
from kubeemu.cluster import Cluster
from kubeemu.crds import load_crd_manifests
from kubeemu.persistence import StateFileError, StateWriter, load_state, restore_state, save_state
from kubeemu.selectors import parse_field_selector, parse_label_selector

FIXTURES = Path(__file__).parent / "fixtures"


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def offer(self, event: Any) -> None:
        self.events.append(event)


def widget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.test/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"source": {"url": "https://example.test/model"}, "size": 3},
    }


def populated(tmp_path: Path) -> tuple[Cluster, dict[str, Any], Path]:
    """A cluster with a CRD, a Widget owning a ConfigMap, and a deleted Widget; its state saved."""
    cluster = Cluster()
    cluster.load_crds(load_crd_manifests(FIXTURES))
    owner = cluster.apply(widget("kept"))
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "owned",
                "namespace": "default",
                "ownerReferences": [
                    {
                        "apiVersion": "example.test/v1",
                        "kind": "Widget",
                        "name": "kept",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
        }
    )
    cluster.apply(widget("gone"))
    widgets = cluster.resource("example.test", "v1", "widgets")
    assert widgets is not None
    cluster.delete(widgets, namespace="default", name="gone")
    path = tmp_path / "state" / "cluster-state.json"
    assert save_state(cluster.store, path) == cluster.store.resource_version
    return cluster, cluster.get(widgets, namespace="default", name="kept"), path


def test_a_restored_cluster_has_the_saved_objects_and_continues_their_resource_versions(
    tmp_path: Path,
) -> None:
    old, kept, path = populated(tmp_path)
    saved_rv = old.store.resource_version

    cluster = Cluster()  # a new apiserver: only the bootstrap objects
    state = restore_state(cluster, path)
    assert state is not None
    assert state.resource_version == saved_rv
    # The CRD's resource is served again without loading any CRD file.
    widgets = cluster.resource("example.test", "v1", "widgets")
    assert widgets is not None
    assert cluster.get(widgets, namespace="default", name="kept") == kept
    listed = cluster.list_objects(
        widgets, namespace="default", labels=parse_label_selector(""), fields=parse_field_selector("")
    )
    assert [item["metadata"]["name"] for item in listed["items"]] == ["kept"]
    assert int(listed["metadata"]["resourceVersion"]) == saved_rv

    # The next write gets a resourceVersion no saved state had.
    changed = dict(kept, spec={**kept["spec"], "size": 4})
    written = cluster.update(widgets, changed, namespace="default", name="kept").object
    assert int(written["metadata"]["resourceVersion"]) == saved_rv + 1

    # A watch resuming from before the restart cannot be served from an empty event log: 410.
    with pytest.raises(errors.APIError) as expired:
        cluster.store.subscribe(widgets.storage_key, Recorder(), since=saved_rv - 1)
    assert expired.value.code == 410

    # The owner index came back too: deleting the Widget collects its ConfigMap.
    configmaps = cluster.resource("", "v1", "configmaps")
    assert configmaps is not None
    cluster.delete(widgets, namespace="default", name="kept")
    with pytest.raises(errors.APIError) as collected:
        cluster.get(configmaps, namespace="default", name="owned")
    assert collected.value.code == 404


def test_the_state_writer_saves_changes_atomically_and_once_more_on_close(tmp_path: Path) -> None:
    cluster = Cluster()
    cluster.load_crds(load_crd_manifests(FIXTURES))
    path = tmp_path / "cluster-state.json"
    writer = StateWriter(cluster.store, path, interval=0.05).start()
    cluster.apply(widget("first"))
    writer.close()
    state = load_state(path)
    assert state is not None
    assert state.resource_version == cluster.store.resource_version
    names = [obj["metadata"]["name"] for obj in state.objects["example.test/widgets"]]
    assert names == ["first"]
    assert path.stat().st_mode & 0o777 == 0o600  # Secrets are in it
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_a_damaged_state_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster-state.json"
    path.write_text(json.dumps({"format": "something-else", "objects": {}}))
    with pytest.raises(StateFileError, match=f"{path} is not a saved emulator state"):
        restore_state(Cluster(), path)
    path.write_text('{"format": "kubeemu-state/v1", "objects"')  # cut off mid-write
    with pytest.raises(StateFileError):
        load_state(path)
    assert load_state(tmp_path / "missing.json") is None
