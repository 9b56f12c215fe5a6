"""The controller's typed adapters on the one object client, against the emulated API server: a
Secret put twice is replaced, a Job created twice comes back as stored, a Job's termination message
is its latest Pod's, a source's status is patched through its subresource, and a finalizer write on
a changed Model is left for the next event. Every failure is a `KubeError`."""

from __future__ import annotations

from typing import Any

import pytest

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.jobs import Jobs
from ai_models.adapters.kube.models import ModelObjects
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import MODEL_CATALOG_SOURCES, MODELS, PODS, Resource
from ai_models.adapters.kube.secrets import Secrets
from ai_models.domain.models.reference import key_of
from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]

NAMESPACE = "team-a"
NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)


@pytest.fixture
def api(kube_api_client: Any) -> Any:
    Objects(kube_api_client, NAMESPACES).create({"metadata": {"name": NAMESPACE}})
    return kube_api_client


def secret(value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token", "namespace": NAMESPACE},
        "stringData": {"token": value},
    }


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}
            }
        },
    }


def test_a_secret_put_twice_is_replaced_and_a_missing_one_reads_as_none(api: Any) -> None:
    secrets = Secrets(api)
    secrets.put(secret("first"))
    secrets.put(secret("second"))

    found = secrets.read(NAMESPACE, "token")
    assert found is not None
    assert found.text("token") == "second"
    assert found.resource_version
    assert secrets.read(NAMESPACE, "absent") is None
    assert secrets.create(NAMESPACE, "token", {"token": b"third"}, labels={}) is False


def test_a_job_created_again_comes_back_as_stored(api: Any) -> None:
    objects = DeliveryObjects(api)
    created = objects.create_job(job("copy"))
    again = objects.create_job(job("copy"))

    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    objects.delete_job(NAMESPACE, "copy")
    objects.delete_job(NAMESPACE, "copy")  # gone already is fine


def test_the_termination_message_is_the_latest_pod_ones(api: Any) -> None:
    pods = Objects(api, PODS)
    for name, finished, message in (
        ("copy-a", "2026-01-01T10:00:00Z", "first attempt"),
        ("copy-b", "2026-01-01T11:00:00Z", "second attempt"),
    ):
        pods.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"job-name": "copy"}},
                "spec": {"containers": [{"name": "work", "image": "busybox"}]},
            }
        )
        terminated = {"exitCode": 1, "finishedAt": finished, "message": message}
        status = {"containerStatuses": [{"name": "work", "state": {"terminated": terminated}}]}
        pods.patch(name, {"status": status}, NAMESPACE, subresource="status")

    jobs = Jobs(api, namespace=NAMESPACE)
    assert jobs.termination_message(job("copy"), container="work") == "second attempt"
    assert jobs.termination_message(job("copy"), container="other") is None
    assert jobs.termination_message(job("none"), container="work") is None


def test_a_source_is_read_and_its_status_patched_through_the_subresource(api: Any) -> None:
    Objects(api, MODEL_CATALOG_SOURCES).create(
        {
            "apiVersion": MODEL_CATALOG_SOURCES.api_version,
            "kind": MODEL_CATALOG_SOURCES.kind,
            "metadata": {"name": "hub"},
            "spec": {"provider": "HuggingFace", "huggingFace": {}},
        }
    )
    sources = CatalogSourceObjects(api)

    patched = sources.patch("hub", {"status": {"failedPasses": 3}}, status=True)
    assert patched["status"]["failedPasses"] == 3
    assert sources.names() == {"hub"}
    assert sources.exists("hub")
    assert not sources.exists("gone")
    with pytest.raises(KubeError) as gone:
        sources.patch("gone", {"metadata": {"labels": {"a": "b"}}})
    assert gone.value.not_found


def test_a_finalizer_write_on_a_changed_model_is_left_for_the_next_event(api: Any) -> None:
    models = Objects(api, MODELS)
    created = models.create(
        {
            "apiVersion": MODELS.api_version,
            "kind": MODELS.kind,
            "metadata": {"name": "qwen", "namespace": NAMESPACE},
            "spec": {"source": {"upload": {}}},
        }
    )
    assert created is not None
    objects = ModelObjects(api)
    objects.add_finalizer(created)
    objects.add_finalizer(created)  # its resourceVersion is old now: a conflict, not an error

    current = objects.get(key_of(created))
    assert current is not None
    assert len(current["metadata"]["finalizers"]) == 1
    objects.patch_status(key_of(created), {"phase": "Pending"})
    assert (objects.get(key_of(created)) or {})["status"]["phase"] == "Pending"
    assert [item["kind"] for item in objects.list_all(key_of(created).kind)] == ["Model"]
