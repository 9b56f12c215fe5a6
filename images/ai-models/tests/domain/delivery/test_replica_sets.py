"""Which ReplicaSets of a delivered Deployment are stale: only those made by the delivery gate alone,
and only once the current one is available."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ai_models.domain.delivery.replica_sets import (
    DESIRED_REPLICAS_ANNOTATION,
    POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION,
    ReplicaSetRef,
    may_have_stale,
    stale_replica_sets,
    without_hash,
)
from ai_models.domain.delivery.template import DeliveredModel, gate, rewrite

UID = "d-1"
USERS = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "server", "image": "inference:1"}]},
}
USERS_EARLIER = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "server", "image": "inference:0"}]},
}
GATED = gate(USERS)
COMPLETE = rewrite(
    GATED, claim="ai-models-web-0123456789", models=[DeliveredModel("llama", "sha256:" + "a" * 64)]
)


def deployment(template: dict[str, Any], *, revision: int = 2) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "team-a",
            "uid": UID,
            "generation": 3,
            "annotations": {REVISION_ANNOTATION: str(revision)},
        },
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": copy.deepcopy(template)},
    }


def replica_set(
    name: str,
    template: dict[str, Any],
    *,
    replicas: int = 2,
    available: int = 0,
    generation: int = 1,
    observed: int = 1,
    owner: str = UID,
    controller: bool = True,
    desired: int | None = None,
    deleting: bool = False,
    revision: int = 1,
) -> dict[str, Any]:
    templ = copy.deepcopy(template)
    templ.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH_LABEL] = name.rsplit("-", 1)[
        -1
    ]
    annotations = {REVISION_ANNOTATION: str(revision)}
    if desired is not None:
        annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": f"uid-{name}",
        "generation": generation,
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": owner,
                "controller": controller,
            }
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    status: dict[str, Any] = {"observedGeneration": observed, "replicas": replicas}
    if available:
        status["availableReplicas"] = available
    return {
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {"replicas": replicas, "template": templ},
        "status": status,
    }


def ref(name: str) -> ReplicaSetRef:
    return ReplicaSetRef(name, f"uid-{name}")


NEW_READY = replica_set("web-new", COMPLETE, available=2, revision=2)
STALE = replica_set("web-gated", GATED, replicas=0)


@pytest.mark.parametrize(
    ("sets", "deleted", "waiting"),
    [
        pytest.param(
            [STALE, NEW_READY], ["web-gated"], [], id="a_gated_only_set_goes_once_the_new_one_is_available"
        ),
        pytest.param(
            [replica_set("web-gated", GATED, replicas=2), NEW_READY],
            ["web-gated"],
            [],
            id="its_replicas_not_yet_scaled_down_do_not_matter_they_never_ran",
        ),
        pytest.param(
            [STALE, replica_set("web-new", COMPLETE, available=1, revision=2)],
            [],
            ["web-gated"],
            id="nothing_before_the_new_set_has_every_replica_available",
        ),
        pytest.param(
            [STALE, replica_set("web-new", COMPLETE, available=2, generation=2, observed=1, revision=2)],
            [],
            ["web-gated"],
            id="nothing_while_the_new_sets_status_is_of_an_older_generation",
        ),
        pytest.param(
            [STALE, replica_set("web-new", COMPLETE, replicas=1, available=1, desired=2, revision=2)],
            [],
            ["web-gated"],
            id="a_new_set_still_growing_in_a_rollout_counts_against_the_deployments_replicas",
        ),
        pytest.param(
            [
                replica_set("web-gated", GATED, replicas=0),
                replica_set("web-new", COMPLETE, replicas=0, revision=2),
            ],
            ["web-gated"],
            [],
            id="with_zero_replicas_the_new_set_counts_as_available",
        ),
        pytest.param(
            [replica_set("web-user", USERS_EARLIER, replicas=0), NEW_READY],
            [],
            [],
            id="a_users_own_earlier_set_without_the_gate_is_kept",
        ),
        pytest.param(
            [replica_set("web-gated", GATED, replicas=1, available=1), NEW_READY],
            [],
            ["web-gated"],
            id="a_gated_set_with_available_pods_is_kept_while_they_run",
        ),
        pytest.param(
            [replica_set("web-old", rewrite(USERS_EARLIER, claim="c", models=[]), replicas=0), NEW_READY],
            [],
            [],
            id="a_set_of_a_complete_template_written_by_the_module_is_kept",
        ),
        pytest.param(
            [
                replica_set("web-old", gate(rewrite(USERS_EARLIER, claim="c", models=[])), replicas=0),
                NEW_READY,
            ],
            [],
            [],
            id="a_complete_gated_template_written_at_create_is_kept",
        ),
        pytest.param(
            [replica_set("web-gated", GATED, replicas=0, owner="other"), NEW_READY],
            [],
            [],
            id="a_set_another_deployment_controls_is_not_ours",
        ),
        pytest.param(
            [replica_set("web-gated", GATED, replicas=0, controller=False), NEW_READY],
            [],
            [],
            id="an_owner_reference_that_is_not_the_controller_does_not_count",
        ),
        pytest.param(
            [replica_set("web-gated", GATED, replicas=0, deleting=True), NEW_READY],
            [],
            [],
            id="a_set_being_deleted_is_not_deleted_again",
        ),
        pytest.param([STALE], [], [], id="nothing_before_the_current_template_has_a_set"),
        pytest.param(
            [STALE, replica_set("web-gated2", gate(USERS_EARLIER), replicas=0, revision=0), NEW_READY],
            ["web-gated", "web-gated2"],
            [],
            id="every_gated_only_set_goes",
        ),
    ],
)
def test_stale_replica_sets(sets: list[dict[str, Any]], deleted: list[str], waiting: list[str]) -> None:
    verdict = stale_replica_sets(deployment(COMPLETE), sets)
    assert verdict.delete == tuple(ref(name) for name in deleted)
    assert verdict.waiting == tuple(ref(name) for name in waiting)
    assert "web-new" not in {item.name for item in (*verdict.delete, *verdict.waiting)}


def test_the_current_set_is_never_deleted_even_when_the_deployment_itself_is_gated_only() -> None:
    # Not a delivered state, but the rule must not depend on the caller for that.
    current = replica_set("web-gated", GATED, replicas=0)
    verdict = stale_replica_sets(
        deployment(GATED), [current, replica_set("web-x", gate(USERS_EARLIER), replicas=0)]
    )
    assert verdict.current == "web-gated"
    assert ref("web-gated") not in verdict.delete
    assert verdict.delete == (ref("web-x"),)


def test_settled_only_when_the_current_set_is_available_and_nothing_waits() -> None:
    assert stale_replica_sets(deployment(COMPLETE), [STALE, NEW_READY]).settled
    assert stale_replica_sets(deployment(COMPLETE), [NEW_READY]).settled
    waiting = replica_set("web-gated", GATED, replicas=1, available=1)
    assert not stale_replica_sets(deployment(COMPLETE), [waiting, NEW_READY]).settled
    assert not stale_replica_sets(deployment(COMPLETE), [STALE]).settled


@pytest.mark.parametrize(("revision", "expected"), [(0, False), (1, False), (2, True), (7, True)])
def test_only_a_deployment_past_its_first_revision_may_have_a_stale_set(
    revision: int, expected: bool
) -> None:
    assert may_have_stale(deployment(COMPLETE, revision=revision)) is expected


def test_a_missing_or_unreadable_revision_means_one_set_so_far() -> None:
    obj = deployment(COMPLETE)
    obj["metadata"]["annotations"][REVISION_ANNOTATION] = "two"
    assert not may_have_stale(obj)
    del obj["metadata"]["annotations"]
    assert not may_have_stale(obj)


def test_the_hash_label_is_no_template_difference() -> None:
    labelled = copy.deepcopy(COMPLETE)
    labelled["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL] = "abc"
    assert without_hash(labelled) == COMPLETE
    only_hash = {"metadata": {"labels": {POD_TEMPLATE_HASH_LABEL: "abc"}}, "spec": {}}
    assert without_hash(only_hash) == {"spec": {}}
