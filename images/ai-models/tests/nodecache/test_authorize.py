"""The node plugin's authorization (D105): kubelet's keys are facts, volume attributes are hints."""

from __future__ import annotations

import pytest

from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    KUBELET_EPHEMERAL,
    KUBELET_POD_NAME,
    KUBELET_POD_NAMESPACE,
    KUBELET_POD_UID,
    VOLUME_CLUSTER_MODEL_ATTRIBUTE,
    VOLUME_DIGEST_ATTRIBUTE,
    VOLUME_MODEL_ATTRIBUTE,
    ModelKind,
    ModelPhase,
)
from ai_models.nodecache.authorize import (
    Grant,
    ModelWanted,
    PodIdentity,
    Refusal,
    Refused,
    authorize,
    kubelet_pod,
    wanted_model,
)

DIGEST = "sha256:" + "a" * 64
OTHER_DIGEST = "sha256:" + "b" * 64
POD = PodIdentity(namespace="team-a", name="server-0", uid="5f0c6a4e-0000-4000-8000-000000000001")
KUBELET = {
    KUBELET_POD_NAMESPACE: POD.namespace,
    KUBELET_POD_NAME: POD.name,
    KUBELET_POD_UID: POD.uid,
    KUBELET_EPHEMERAL: "true",
}
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")


def refusal(call: object) -> Refused:
    assert callable(call)
    with pytest.raises(Refused) as raised:
        call()
    return raised.value


def test_kubelet_keys_make_the_pod() -> None:
    assert kubelet_pod(KUBELET) == POD


@pytest.mark.parametrize("missing", [KUBELET_POD_NAMESPACE, KUBELET_POD_NAME, KUBELET_POD_UID])
def test_a_request_without_a_kubelet_key_is_an_invalid_argument(missing: str) -> None:
    context = {key: value for key, value in KUBELET.items() if key != missing}
    refused = refusal(lambda: kubelet_pod(context))
    assert refused.code is Refusal.INVALID_ARGUMENT
    assert missing in refused.message
    assert "podInfoOnMount" in refused.message


def test_a_pod_namespace_no_api_server_could_write_is_an_invalid_argument() -> None:
    refused = refusal(lambda: kubelet_pod({**KUBELET, KUBELET_POD_NAMESPACE: "../etc" + "x" * 500}))
    assert refused.code is Refusal.INVALID_ARGUMENT
    assert len(refused.message) < 400  # a hostile value is quoted only in part


@pytest.mark.parametrize("ephemeral", ["false", "", "True"])
def test_a_volume_that_is_not_inline_ephemeral_is_denied(ephemeral: str) -> None:
    context = {**KUBELET, KUBELET_EPHEMERAL: ephemeral}
    if not ephemeral:
        del context[KUBELET_EPHEMERAL]
    refused = refusal(lambda: kubelet_pod(context))
    assert refused.code is Refusal.PERMISSION_DENIED
    assert "pod team-a/server-0" in refused.message
    assert "PersistentVolume" in refused.message


def test_a_model_is_always_looked_up_in_the_trusted_namespace() -> None:
    # A hand-written attribute cannot point elsewhere: there is no namespace attribute to honour.
    attributes = {VOLUME_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: DIGEST, "namespace": "team-b"}
    assert wanted_model(attributes, namespace="team-a", pod="pod team-a/x") == ModelWanted(QWEN, DIGEST)


def test_a_cluster_model_has_no_namespace() -> None:
    attributes = {VOLUME_CLUSTER_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: DIGEST}
    wanted = wanted_model(attributes, namespace="team-a", pod="pod team-a/x")
    assert wanted.key == ModelKey(ModelKind.CLUSTER_MODEL, "", "qwen")


@pytest.mark.parametrize(
    ("attributes", "says"),
    [
        ({VOLUME_DIGEST_ATTRIBUTE: DIGEST}, "neither is"),
        ({VOLUME_MODEL_ATTRIBUTE: "a", VOLUME_CLUSTER_MODEL_ATTRIBUTE: "b"}, "both are"),
        ({VOLUME_MODEL_ATTRIBUTE: "Not_A_Name", VOLUME_DIGEST_ATTRIBUTE: DIGEST}, "not a valid object name"),
        ({VOLUME_MODEL_ATTRIBUTE: "qwen"}, VOLUME_DIGEST_ATTRIBUTE),
        ({VOLUME_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: "sha256:" + "A" * 64}, "lowercase"),
        ({VOLUME_MODEL_ATTRIBUTE: "qwen", VOLUME_DIGEST_ATTRIBUTE: "md5:abc"}, "md5:abc"),
    ],
)
def test_malformed_attributes_are_invalid_arguments(attributes: dict[str, str], says: str) -> None:
    refused = refusal(lambda: wanted_model(attributes, namespace="team-a", pod="pod team-a/x"))
    assert refused.code is Refusal.INVALID_ARGUMENT
    assert says in refused.message
    assert "pod team-a/x" in refused.message


def test_a_ready_model_with_the_requested_digest_is_granted() -> None:
    seen = ModelSeen(QWEN, ModelPhase.READY, digest=DIGEST)
    assert authorize(pod=POD, wanted=ModelWanted(QWEN, DIGEST), seen=seen) == Grant(POD, QWEN, DIGEST)


def test_a_model_missing_from_the_pods_namespace_is_denied() -> None:
    refused = refusal(
        lambda: authorize(pod=POD, wanted=ModelWanted(QWEN, DIGEST), seen=ModelSeen(QWEN, None))
    )
    assert refused.code is Refusal.PERMISSION_DENIED
    assert refused.message.startswith("pod team-a/server-0: namespace team-a has no Model qwen")


def test_a_missing_cluster_model_is_denied() -> None:
    key = ModelKey(ModelKind.CLUSTER_MODEL, "", "qwen")
    refused = refusal(lambda: authorize(pod=POD, wanted=ModelWanted(key, DIGEST), seen=ModelSeen(key, None)))
    assert refused.code is Refusal.PERMISSION_DENIED
    assert "there is no ClusterModel qwen" in refused.message


@pytest.mark.parametrize("phase", [ModelPhase.PUBLISHING, ModelPhase.FAILED, ModelPhase.DELETING])
def test_a_model_that_is_not_ready_is_denied(phase: ModelPhase) -> None:
    seen = ModelSeen(QWEN, phase, digest=DIGEST)
    refused = refusal(lambda: authorize(pod=POD, wanted=ModelWanted(QWEN, DIGEST), seen=seen))
    assert refused.code is Refusal.PERMISSION_DENIED
    assert f"Model team-a/qwen is {phase.value}, not Ready" in refused.message


def test_a_digest_the_model_does_not_publish_is_denied() -> None:
    seen = ModelSeen(QWEN, ModelPhase.READY, digest=OTHER_DIGEST)
    refused = refusal(lambda: authorize(pod=POD, wanted=ModelWanted(QWEN, DIGEST), seen=seen))
    assert refused.code is Refusal.PERMISSION_DENIED
    assert OTHER_DIGEST in refused.message
    assert DIGEST in refused.message
    assert "pod team-a/server-0" in refused.message


def test_the_object_read_must_be_the_one_asked_for() -> None:
    other = ModelKey(ModelKind.MODEL, "team-b", "qwen")
    with pytest.raises(ValueError, match="not the one asked for"):
        authorize(pod=POD, wanted=ModelWanted(QWEN, DIGEST), seen=ModelSeen(other, ModelPhase.READY, DIGEST))
