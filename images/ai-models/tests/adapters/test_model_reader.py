"""The one caching Model reader (adapters/kube/model_reader.py): what it keeps, for how long, and
that a failed read is never kept. The node plugin's Ready-only use is tested in
tests/nodecache/test_models_reader.py, the api's in tests/api."""

from __future__ import annotations

from typing import Any

import pytest

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.model_reader import ModelReader, keep_every_answer, keep_ready, model_getter
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import CLUSTER_MODELS, MODELS, Resource
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind, ModelPhase
from kubeemu.pytest_fixtures import kube_api_client, kube_emulator, kube_emulator_factory

__all__ = ["kube_api_client", "kube_emulator", "kube_emulator_factory"]

DIGEST = "sha256:" + "d" * 64
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
SHARED = ModelKey(ModelKind.CLUSTER_MODEL, "", "shared")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """A read function whose answers the test sets; it counts the reads."""

    def __init__(self) -> None:
        self.bodies: dict[ModelKey, dict[str, Any] | None] = {}
        self.failure: KubeError | None = None
        self.reads = 0

    def __call__(self, key: ModelKey) -> dict[str, Any] | None:
        self.reads += 1
        if self.failure is not None:
            raise self.failure
        return self.bodies.get(key)


def ready() -> dict[str, Any]:
    return {"status": {"phase": "Ready", "artifact": {"digest": DIGEST}}}


def test_every_answer_is_kept_for_the_ttl_absences_included() -> None:
    answers, clock = Answers(), Clock()
    reader = ModelReader(answers, ttl_seconds=5.0, keep=keep_every_answer, clock=clock)

    assert reader.read(QWEN).body is None
    answers.bodies[QWEN] = ready()
    assert reader.read(QWEN).body is None, "the absence is kept: a missing object costs one read per TTL"
    assert answers.reads == 1
    clock.now += 5.0
    assert reader.read(QWEN).seen.phase is ModelPhase.READY
    assert answers.reads == 2


def test_a_fresh_read_asks_the_server_and_keeps_its_answer() -> None:
    answers, clock = Answers(), Clock()
    reader = ModelReader(answers, ttl_seconds=5.0, clock=clock)
    answers.bodies[QWEN] = {"status": {"phase": "Publishing"}}
    assert reader.read(QWEN).seen.phase is ModelPhase.PUBLISHING

    answers.bodies[QWEN] = ready()
    assert reader.read(QWEN, fresh=True).seen.phase is ModelPhase.READY
    assert reader.read(QWEN).seen.phase is ModelPhase.READY, "the fresh answer replaced the kept one"
    assert answers.reads == 2


def test_an_answer_the_rule_does_not_keep_drops_the_one_kept_before() -> None:
    answers, clock = Answers(), Clock()
    reader = ModelReader(answers, ttl_seconds=5.0, keep=keep_ready, clock=clock)
    answers.bodies[QWEN] = ready()
    reader.read(QWEN)
    answers.bodies[QWEN] = {"status": {"phase": "Failed"}}

    assert reader.read(QWEN, fresh=True).seen.phase is ModelPhase.FAILED
    answers.bodies[QWEN] = ready()
    assert reader.read(QWEN).seen.phase is ModelPhase.READY
    assert answers.reads == 3, "the Failed answer was not kept, and the Ready one it replaced is gone"


def test_a_failed_read_raises_and_is_never_kept() -> None:
    answers, clock = Answers(), Clock()
    reader = ModelReader(answers, ttl_seconds=5.0, clock=clock)
    answers.failure = KubeError(verb="get", kind="Model", name="qwen", namespace="team-a", status=503)

    with pytest.raises(KubeError):
        reader.read(QWEN)
    answers.failure = None
    answers.bodies[QWEN] = ready()
    assert reader.read(QWEN).seen.phase is ModelPhase.READY


def test_the_kept_answers_are_bounded_least_recently_used_out_first() -> None:
    answers, clock = Answers(), Clock()
    reader = ModelReader(answers, ttl_seconds=60.0, capacity=2, clock=clock)
    keys = [ModelKey(ModelKind.CLUSTER_MODEL, "", f"m{index}") for index in range(3)]
    reader.read(keys[0])
    reader.read(keys[1])
    reader.read(keys[0])
    reader.read(keys[2])  # pushes out keys[1], the least recently used

    reads = answers.reads
    reader.read(keys[0])
    reader.read(keys[2])
    assert answers.reads == reads
    reader.read(keys[1])
    assert answers.reads == reads + 1


def test_the_getter_reads_models_and_cluster_models_from_the_api_server(kube_api_client: Any) -> None:
    Objects(kube_api_client, Resource("v1", "Namespace", "namespaces", namespaced=False)).create(
        {"metadata": {"name": "team-a"}}
    )
    Objects(kube_api_client, MODELS).create(
        {
            "kind": "Model",
            "metadata": {"name": "qwen", "namespace": "team-a"},
            "spec": {"source": {"upload": {}}},
        }
    )
    Objects(kube_api_client, CLUSTER_MODELS).create(
        {"kind": "ClusterModel", "metadata": {"name": "shared"}, "spec": {"source": {"upload": {}}}}
    )
    read = model_getter(kube_api_client, timeout=(3.0, 5.0))

    assert (read(QWEN) or {})["metadata"]["name"] == "qwen"
    assert (read(SHARED) or {})["kind"] == "ClusterModel"
    assert read(ModelKey(ModelKind.MODEL, "team-b", "qwen")) is None
