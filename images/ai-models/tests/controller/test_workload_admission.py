"""The workload admission handler: an AdmissionReview request in, the JSON patch (or nothing) out.

The reads it makes are given as functions, so each test states what the cluster holds; the patch is
applied with `jsonpatch` (an RFC 6902 implementation) to see the object the API server would store.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch
import pytest

from ai_models.controller.delivery.admission import WorkloadAdmission
from ai_models.controller.delivery.shared_pvc import SharedPVCAdmission, SharedPVCSettings
from ai_models.controller.delivery.strategy import Unreadable
from ai_models.domain.delivery.claims import claim_name
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.template import applied, gated
from ai_models.domain.models.reference import ModelKey
from ai_models.names import (
    DELIVERY_SCHEDULING_GATE,
    DELIVERY_TEMPLATE_LABEL,
    DELIVERY_TEMPLATE_LABEL_VALUE,
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODEL_ANNOTATION,
    MODELS_VARIABLE,
    MODULE_LABEL,
    MODULE_NAMESPACE,
    OWNER_UID_LABEL,
    SHARED_PVC_LABEL,
    ModelKind,
)

DIGEST = "sha256:" + "a1" * 32
QWEN = ModelKey(ModelKind.MODEL, "team-a", "qwen")
READY = {
    "apiVersion": "ai.deckhouse.io/v1alpha1",
    "kind": "Model",
    "metadata": {"name": "qwen", "namespace": "team-a"},
    "status": {"phase": "Ready", "artifact": {"digest": DIGEST, "sizeBytes": 1000}},
}
CLAIM = claim_name(Workload(WorkloadKind.DEPLOYMENT, "team-a", "web"), [DIGEST])


def deployment(annotations: Mapping[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", **meta, "annotations": dict(annotations or {MODEL_ANNOTATION: "qwen"})},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
            },
        },
    }


def review(obj: Mapping[str, Any], *, operation: str = "CREATE", namespace: str = "team-a") -> dict[str, Any]:
    return {"uid": "u1", "operation": operation, "namespace": namespace, "object": copy.deepcopy(dict(obj))}


def filled_claim() -> dict[str, Any]:
    return {
        "metadata": {
            "name": CLAIM,
            "namespace": "team-a",
            "uid": "claim-uid",
            "labels": {SHARED_PVC_LABEL: "true", MODULE_LABEL: "ai-models", OWNER_UID_LABEL: "web-uid"},
            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "web-uid", "controller": True}],
            "annotations": {MATERIALIZED_DIGESTS_ANNOTATION: DIGEST},
        },
        "spec": {"volumeName": "pv-1"},
        "status": {"phase": "Bound"},
    }


class Cluster:
    """What the handler may read: models by key, claims by (namespace, name); reads are counted."""

    def __init__(
        self,
        models: Mapping[ModelKey, Mapping[str, Any]] | None = None,
        claims: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        *,
        failing: bool = False,
    ) -> None:
        self.models = dict(models or {})
        self.claims = dict(claims or {})
        self.failing = failing
        self.reads: list[str] = []

    def model(self, key: ModelKey) -> Mapping[str, Any] | None:
        self.reads.append(str(key))
        if self.failing:
            raise Unreadable(f"{key.describe()}: the API server answered 503")
        return self.models.get(key)

    def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append(f"claim {namespace}/{name}")
        return self.claims.get((namespace, name))

    def admission(self) -> WorkloadAdmission:
        policy = SharedPVCSettings(api_url="").policy
        return WorkloadAdmission(
            read_model=self.model, strategy=SharedPVCAdmission(read_claim=self.claim, policy=policy)
        )


def admitted(cluster: Cluster, request: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The object as stored after the patch, and the warnings."""
    answer = cluster.admission()(request)
    assert answer.allowed
    obj = jsonpatch.apply_patch(request["object"], list(answer.patch)) if answer.patch else request["object"]
    return obj, tuple(answer.warnings)


def template_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = obj["spec"]["template"]
    return template


def test_ready_models_get_the_complete_template_at_create_gated_until_the_claim_is_filled() -> None:
    cluster = Cluster({QWEN: READY})

    obj, warnings = admitted(cluster, review(deployment()))

    template = template_of(obj)
    record = applied(template)
    assert record is not None
    assert record.claim == CLAIM
    assert gated(template)
    env = {item["name"]: item.get("value") for item in template["spec"]["containers"][0]["env"]}
    assert json.loads(env[MODELS_VARIABLE])[0]["digest"] == DIGEST
    assert obj["metadata"].get("namespace") is None  # the patch touches the template only
    assert cluster.reads == [str(QWEN), f"claim team-a/{CLAIM}"]
    assert len(warnings) == 1
    assert DELIVERY_SCHEDULING_GATE in warnings[0]
    assert "being filled" in warnings[0]


def test_a_filled_claim_gives_the_complete_template_without_the_gate_and_no_warning() -> None:
    cluster = Cluster({QWEN: READY}, {("team-a", CLAIM): filled_claim()})

    obj, warnings = admitted(cluster, review(deployment()))

    assert applied(template_of(obj)) is not None
    assert not gated(template_of(obj))
    assert warnings == ()


def test_a_model_not_ready_gates_the_users_template_and_says_why() -> None:
    publishing = copy.deepcopy(READY)
    publishing["status"] = {"phase": "Publishing"}
    cluster = Cluster({QWEN: publishing})

    obj, warnings = admitted(cluster, review(deployment()))

    assert gated(template_of(obj))
    assert applied(template_of(obj)) is None
    assert cluster.reads == [str(QWEN)]  # no claim is wanted yet
    assert "a model it names is not Ready" in warnings[0]


def test_a_failed_read_gates_the_template_instead_of_refusing_the_workload() -> None:
    obj, warnings = admitted(Cluster(failing=True), review(deployment()))

    assert gated(template_of(obj))
    assert applied(template_of(obj)) is None
    assert "could not read" in warnings[0]


def test_an_object_without_a_name_yet_is_gated_without_any_read() -> None:
    cluster = Cluster({QWEN: READY})
    unnamed = deployment(generateName="web-")
    del unnamed["metadata"]["name"]

    obj, warnings = admitted(cluster, review(unnamed))

    assert gated(template_of(obj))
    assert cluster.reads == []
    assert "no name yet" in warnings[0]


def test_a_broken_annotation_is_gated_and_the_warning_names_the_problem() -> None:
    cluster = Cluster({QWEN: READY})

    obj, warnings = admitted(cluster, review(deployment({MODEL_ANNOTATION: "qwen,qwen"})))

    assert gated(template_of(obj))
    assert cluster.reads == []
    assert warnings[0].startswith("ai-models: ")
    assert MODEL_ANNOTATION in warnings[0]


def test_an_update_that_removes_the_annotations_strips_what_the_module_added() -> None:
    cluster = Cluster({QWEN: READY}, {("team-a", CLAIM): filled_claim()})
    delivered, _ = admitted(cluster, review(deployment()))
    without = copy.deepcopy(delivered)
    without["metadata"]["annotations"] = {}

    obj, warnings = admitted(cluster, review(without, operation="UPDATE"))

    assert template_of(obj) == template_of(deployment())
    assert warnings == ()


def test_an_update_of_a_delivered_workload_changes_nothing_but_the_delivery_label() -> None:
    cluster = Cluster({QWEN: READY})
    created, _ = admitted(cluster, review(deployment()))
    assert created["metadata"]["labels"][DELIVERY_TEMPLATE_LABEL] == DELIVERY_TEMPLATE_LABEL_VALUE
    cluster.claims[("team-a", CLAIM)] = filled_claim()
    relabelled = copy.deepcopy(created)
    relabelled["metadata"]["labels"] = {"team": "a"}

    answer = cluster.admission()(review(relabelled, operation="UPDATE"))

    assert answer.allowed
    # The gated complete template stays (no rollout for a label); the label the after-delete hook
    # selects comes back (D158).
    assert list(answer.patch) == [
        {
            "op": "add",
            "path": "/metadata/labels/ai.deckhouse.io~1model-delivery-template",
            "value": DELIVERY_TEMPLATE_LABEL_VALUE,
        }
    ]


def test_an_update_that_removes_the_annotations_takes_the_delivery_label_off() -> None:
    cluster = Cluster({QWEN: READY}, {("team-a", CLAIM): filled_claim()})
    delivered, _ = admitted(cluster, review(deployment()))
    without = copy.deepcopy(delivered)
    without["metadata"]["annotations"] = {}

    obj, _ = admitted(cluster, review(without, operation="UPDATE"))

    assert DELIVERY_TEMPLATE_LABEL not in (obj["metadata"].get("labels") or {})


@pytest.mark.parametrize(
    "request_",
    [
        review(deployment(), operation="DELETE"),
        {**review(deployment()), "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}},
        review(deployment(), namespace=MODULE_NAMESPACE),
    ],
    ids=["delete", "another-kind", "module-namespace"],
)
def test_what_the_webhook_is_not_for_is_admitted_unchanged(request_: dict[str, Any]) -> None:
    cluster = Cluster({QWEN: READY})

    answer = cluster.admission()(request_)

    assert answer.allowed
    assert list(answer.patch) == []
