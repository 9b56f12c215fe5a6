"""Finalizers, deletionTimestamp, namespace lifecycle and ownerReference garbage collection."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as typed_client
from kubernetes import watch as typed_watch
from kubernetes.client.exceptions import ApiException

from kubeemu.pytest_fixtures import api_status

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client
watch: Any = typed_watch


def configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}}


def gone(read: Any) -> bool:
    try:
        read()
    except ApiException as exc:
        return bool(exc.status == 404)
    return False


def test_delete_with_finalizers_marks_then_last_finalizer_removal_deletes(api: Any) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map(
        "default", configmap("f", finalizers=["example.test/a", "example.test/b"])
    )
    marked = core.delete_namespaced_config_map("f", "default")
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    still = core.read_namespaced_config_map("f", "default")
    assert still.metadata.deletion_timestamp is not None
    stream = watch.Watch().stream(
        core.list_namespaced_config_map,
        "default",
        field_selector="metadata.name=f",
        resource_version=still.metadata.resource_version,
        timeout_seconds=5,
    )
    core.patch_namespaced_config_map(
        "f",
        "default",
        {"metadata": {"finalizers": ["example.test/b"]}},
        _content_type="application/merge-patch+json",
    )
    core.patch_namespaced_config_map(
        "f", "default", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    events = []
    for event in stream:
        events.append(event["type"])
        if event["type"] == "DELETED":
            break
    assert events == ["MODIFIED", "DELETED"]
    assert gone(lambda: core.read_namespaced_config_map("f", "default"))
    assert created.metadata.uid


def test_no_new_finalizers_once_deleting(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("f", finalizers=["example.test/a"]))
    core.delete_namespaced_config_map("f", "default")
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map(
            "f",
            "default",
            {"metadata": {"finalizers": ["example.test/a", "x/new"]}},
            _content_type="application/merge-patch+json",
        )
    assert caught.value.status == 422
    assert (
        "no new finalizers can be added if the object is being deleted" in api_status(caught.value)["message"]
    )


def test_delete_precondition_on_uid_is_409(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("p"))
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_config_map("p", "default", body={"preconditions": {"uid": "not-it"}})
    assert caught.value.status == 409


def test_namespace_deletion_removes_its_content(api: Any) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", configmap("c"))
    core.create_namespaced_config_map("doomed", configmap("held", finalizers=["example.test/hold"]))
    core.delete_namespace("doomed")
    terminating = core.read_namespace("doomed")
    assert terminating.status.phase == "Terminating"
    assert gone(lambda: core.read_namespaced_config_map("c", "doomed"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("doomed", configmap("new"))
    assert caught.value.status == 403
    assert "because it is being terminated" in api_status(caught.value)["message"]
    core.patch_namespaced_config_map(
        "held", "doomed", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    assert gone(lambda: core.read_namespace("doomed"))


def test_garbage_collection_deletes_dependents_of_a_deleted_owner(api: Any) -> None:
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map("default", configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map("default", configmap("child", ownerReferences=[ref]))
    other = core.create_namespaced_config_map("default", configmap("other-owner"))
    other_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "other-owner", "uid": other.metadata.uid}
    core.create_namespaced_config_map("default", configmap("shared", ownerReferences=[ref, other_ref]))
    core.delete_namespaced_config_map("owner", "default")
    assert gone(lambda: core.read_namespaced_config_map("child", "default"))
    assert not gone(lambda: core.read_namespaced_config_map("shared", "default"))


def test_a_dependent_created_after_its_owner_was_deleted_is_collected(api: Any) -> None:
    """A controller that read its owner from a cache writes a dependent after the owner is gone:
    the garbage collector deletes it. An owner uid never seen (a test's made-up one) keeps it."""
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map("default", configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.delete_namespaced_config_map("owner", "default")
    created = core.create_namespaced_config_map("default", configmap("late", ownerReferences=[ref]))
    assert created.metadata.name == "late"  # the create itself succeeds, as on a cluster
    assert gone(lambda: core.read_namespaced_config_map("late", "default"))
    living = core.create_namespaced_config_map("default", configmap("living"))
    living_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "living", "uid": living.metadata.uid}
    core.create_namespaced_config_map("default", configmap("kept", ownerReferences=[ref, living_ref]))
    made_up = {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": "made-up-uid"}
    core.create_namespaced_config_map("default", configmap("unknown", ownerReferences=[made_up]))
    assert not gone(lambda: core.read_namespaced_config_map("kept", "default"))
    assert not gone(lambda: core.read_namespaced_config_map("unknown", "default"))


def test_orphan_propagation_keeps_dependents_without_the_owner_reference(api: Any) -> None:
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map("default", configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map("default", configmap("child", ownerReferences=[ref]))
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    child = core.read_namespaced_config_map("child", "default")
    assert child.metadata.owner_references is None


def test_deleting_a_crd_unregisters_its_resources(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(
        "example.test",
        "v1",
        "gadgets",
        {"apiVersion": "example.test/v1", "kind": "Gadget", "metadata": {"name": "g"}},
    )
    client.ApiextensionsV1Api(api).delete_custom_resource_definition("gadgets.example.test")
    with pytest.raises(ApiException) as caught:
        custom.list_cluster_custom_object("example.test", "v1", "gadgets")
    assert caught.value.status == 404
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert "example.test" in groups  # widgets keep the group alive
