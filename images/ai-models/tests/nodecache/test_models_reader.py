"""The node plugin's Model reads (nodecache/models.py) against the API emulator."""

from __future__ import annotations

from typing import Any

import pytest

from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind, ModelPhase
from ai_models.nodecache.models import ModelsUnreadable, NodeModels
from csi.models import ClusterModels
from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import RunningEmulator

DIGEST = "sha256:" + "c" * 64
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
SHARED = ModelKey(ModelKind.CLUSTER_MODEL, "", "shared")
READY_SEEN = ModelSeen(QWEN, ModelPhase.READY, digest=DIGEST)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_reads_a_ready_model_and_a_cluster_model(kube_api_client: Any, cluster_models: ClusterModels) -> None:
    cluster_models.put(QWEN, digest=DIGEST)
    cluster_models.put(SHARED, phase=ModelPhase.PUBLISHING)
    reader = NodeModels.of_cluster(kube_api_client)
    assert reader.seen(QWEN) == ModelSeen(QWEN, ModelPhase.READY, digest=DIGEST, size_bytes=1)
    assert reader.seen(SHARED) == ModelSeen(SHARED, ModelPhase.PUBLISHING)
    assert reader.seen(ModelKey(ModelKind.MODEL, "team-b", "qwen")).phase is None


def test_a_ready_answer_is_kept_for_the_ttl_and_read_again_after(
    kube_api_client: Any, cluster_models: ClusterModels
) -> None:
    cluster_models.put(QWEN, digest=DIGEST)
    clock = Clock()
    reader = NodeModels.of_cluster(kube_api_client, ttl_seconds=10.0, clock=clock)
    assert reader.seen(QWEN).phase is ModelPhase.READY
    cluster_models.delete(QWEN)
    clock.now += 9.0
    assert reader.seen(QWEN).phase is ModelPhase.READY  # kept: kubelet's retries cost no GET
    clock.now += 2.0
    assert reader.seen(QWEN).phase is None


def test_an_answer_that_refuses_is_never_kept(kube_api_client: Any, cluster_models: ClusterModels) -> None:
    reader = NodeModels.of_cluster(kube_api_client, clock=Clock())
    assert reader.seen(QWEN).phase is None
    cluster_models.put(QWEN, phase=ModelPhase.PUBLISHING)
    assert reader.seen(QWEN).phase is ModelPhase.PUBLISHING
    cluster_models.put(QWEN, digest=DIGEST)
    assert reader.seen(QWEN) == ModelSeen(QWEN, ModelPhase.READY, digest=DIGEST, size_bytes=1)


def test_the_kept_answers_are_bounded() -> None:
    reads: list[ModelKey] = []

    def read(key: ModelKey) -> dict[str, Any]:
        reads.append(key)
        return {"status": {"phase": "Ready", "artifact": {"digest": DIGEST}}}

    reader = NodeModels(read, capacity=2, clock=Clock())
    keys = [ModelKey(ModelKind.CLUSTER_MODEL, "", f"m{index}") for index in range(3)]
    for key in keys:
        reader.seen(key)
    reader.seen(keys[2])
    reader.seen(keys[0])  # pushed out by the third
    assert reads == [*keys, keys[0]]


def test_an_api_server_that_refuses_the_read_is_unreadable_and_names_the_rbac(
    kube_emulator: RunningEmulator, cluster_models: ClusterModels
) -> None:
    cluster_models.put(QWEN, digest=DIGEST)
    nobody = Identity(name="system:serviceaccount:d8-ai-models:nobody", token="t-nobody")
    reader = NodeModels.of_cluster(kube_emulator.api_client(kube_emulator.add_identity(nobody)))
    with pytest.raises(ModelsUnreadable, match=r"Model team-a/qwen: the API server answered 403.*RBAC"):
        reader.seen(QWEN)


@pytest.mark.parametrize(
    ("obj", "seen"),
    [
        ({"status": {"phase": "Ready", "artifact": {"digest": DIGEST}}}, READY_SEEN),
        ({"status": {"phase": "Sideways"}}, ModelSeen(QWEN, ModelPhase.PENDING)),
        ({"status": "garbage"}, ModelSeen(QWEN, ModelPhase.PENDING)),
        ({"status": {"phase": "Ready", "artifact": {"digest": 7}}}, ModelSeen(QWEN, ModelPhase.READY)),
        ({}, ModelSeen(QWEN, ModelPhase.PENDING)),
    ],
)
def test_a_model_is_read_defensively(obj: dict[str, Any], seen: ModelSeen) -> None:
    assert ModelSeen.of(QWEN, obj) == seen
