"""Deleting a shared claim against the emulated API server: only the very claim that was judged
(uid precondition); gone already, or another claim under the name now, is no error (D100)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.claims import DeliveryObjects
from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]

NAMESPACE = "team-a"


@pytest.fixture
def core(kube_api_client: Any) -> k8s.CoreV1Api:
    api = k8s.CoreV1Api(kube_api_client)
    api.create_namespace({"metadata": {"name": NAMESPACE}})
    return api


def create_claim(core: k8s.CoreV1Api, name: str) -> str:
    response = core.create_namespaced_persistent_volume_claim(
        NAMESPACE,
        {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        _preload_content=False,
    )
    return str(json.loads(response.data)["metadata"]["uid"])


def claim_names(core: k8s.CoreV1Api) -> list[str]:
    response = core.list_namespaced_persistent_volume_claim(NAMESPACE, _preload_content=False)
    return [item["metadata"]["name"] for item in json.loads(response.data)["items"]]


def test_a_claim_is_deleted_only_while_it_is_the_object_judged(
    core: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    objects = DeliveryObjects(kube_api_client)
    judged = create_claim(core, "ai-models-web-0123456789")
    core.delete_namespaced_persistent_volume_claim(
        "ai-models-web-0123456789", NAMESPACE, _preload_content=False
    )
    current = create_claim(core, "ai-models-web-0123456789")  # made again since, under the same name

    assert objects.delete_claim(NAMESPACE, "ai-models-web-0123456789", uid=judged) is False
    assert claim_names(core) == ["ai-models-web-0123456789"]

    assert objects.delete_claim(NAMESPACE, "ai-models-web-0123456789", uid=current) is True
    assert claim_names(core) == []
    assert objects.delete_claim(NAMESPACE, "ai-models-web-0123456789", uid=current) is False
    assert objects.delete_claim("nowhere", "ai-models-web-0123456789", uid=current) is False
