"""Shared claims as the storage-prerequisites verdict counts them: only the module's, a Pending one
refuted only by the latest refusal about its own uid that names the access mode."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ai_models.domain.delivery.claims import claim_labels, owner_reference
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.read_write_many import claim_facts, needs_events
from ai_models.domain.storage.prerequisites import (
    PrerequisitesReason,
    SharedClaimFacts,
    StorageClassFacts,
    StorageInputs,
    evaluate,
)
from ai_models.names import OWNER_UID_LABEL, SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE

WEB = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", uid="w-1")
REFUSAL = (
    'failed to provision volume with StorageClass "rbd": rpc error: code = InvalidArgument desc = '
    "multi node access modes are only supported on rbd `block` type volumes"
)
QUOTA = 'failed to provision volume with StorageClass "rbd": exceeded quota: team-a-storage'


def claim(phase: str | None = "Pending", *, uid: str = "c-1") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "ai-models-web-0123456789",
            "namespace": "team-a",
            "uid": uid,
            "labels": claim_labels(WEB),
            "ownerReferences": [owner_reference(WEB)],
        },
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "rbd"},
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def foreign(obj: dict[str, Any]) -> dict[str, Any]:
    """The same claim, labelled by someone else: only the shared-claim label."""
    copied = copy.deepcopy(obj)
    copied["metadata"]["labels"] = {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}
    del copied["metadata"]["ownerReferences"]
    return copied


def event(
    message: str, *, uid: str = "c-1", at: str = "2026-12-02T01:00:00Z", **changes: Any
) -> dict[str, Any]:
    return {
        "reason": "ProvisioningFailed",
        "type": "Warning",
        "message": message,
        "lastTimestamp": at,
        "involvedObject": {"kind": "PersistentVolumeClaim", "name": "ai-models-web-0123456789", "uid": uid},
        **changes,
    }


@pytest.mark.parametrize(
    ("obj", "events", "refusal"),
    [
        pytest.param(claim(), [event(REFUSAL)], REFUSAL, id="a_refusal_naming_the_access_mode"),
        pytest.param(claim(), [event(QUOTA)], None, id="another_failure_says_nothing_about_read_write_many"),
        pytest.param(claim(), [], None, id="no_event_yet"),
        pytest.param(
            claim(), [event(REFUSAL, uid="forged")], None, id="an_event_about_another_uid_is_ignored"
        ),
        pytest.param(claim(), [event(REFUSAL, type="Normal")], None, id="only_warnings_count"),
        pytest.param(
            claim(),
            [event(REFUSAL, at="2026-12-02T01:00:00Z"), event(QUOTA, at="2026-12-02T01:05:00Z")],
            None,
            id="the_latest_failure_decides_a_later_quota_error",
        ),
        pytest.param(
            claim(),
            [event(QUOTA, at="2026-12-02T01:00:00Z"), event(REFUSAL, at="2026-12-02T01:05:00Z")],
            REFUSAL,
            id="the_latest_failure_decides_a_later_refusal",
        ),
        pytest.param(claim(None), [event(REFUSAL)], REFUSAL, id="a_claim_without_a_status_is_pending"),
        pytest.param(claim("Bound"), [event(REFUSAL)], None, id="a_bound_claim_is_not_refused"),
    ],
)
def test_a_claims_access_mode_refusal(
    obj: dict[str, Any], events: list[dict[str, Any]], refusal: str | None
) -> None:
    facts = claim_facts(obj, events)
    assert facts is not None
    assert facts.access_mode_refusal == refusal
    assert (facts.namespace, facts.name, facts.storage_class) == ("team-a", "ai-models-web-0123456789", "rbd")


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(foreign(claim()), id="only_the_shared_claim_label"),
        pytest.param(
            {**claim(), "metadata": {**claim()["metadata"], "ownerReferences": []}},
            id="an_owner_uid_label_without_that_owner_reference",
        ),
        pytest.param(
            {
                **claim(),
                "metadata": {
                    **claim()["metadata"],
                    "labels": {**claim_labels(WEB), OWNER_UID_LABEL: "other"},
                },
            },
            id="an_owner_uid_label_of_another_object",
        ),
    ],
)
def test_claims_the_module_did_not_make_do_not_count(obj: dict[str, Any]) -> None:
    assert claim_facts(obj, [event(REFUSAL)]) is None
    assert not needs_events(obj)


def test_only_a_pending_claim_of_the_module_has_its_events_read() -> None:
    assert needs_events(claim())
    assert needs_events(claim(None))
    assert not needs_events(claim("Bound"))
    assert not needs_events(claim("Lost"))


def verdict_over(*claims: SharedClaimFacts | None) -> PrerequisitesReason:
    inputs = StorageInputs(
        mode=DeliveryMode.SHARED_PVC,
        storage_classes=(StorageClassFacts("rbd", is_default=True),),
        shared_claims=tuple(item for item in claims if item is not None),
    )
    return evaluate(inputs).reason


def test_the_verdict_over_the_module_claims() -> None:
    assert verdict_over() is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    assert (
        verdict_over(claim_facts(claim(), [event(QUOTA)])) is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    )
    assert verdict_over(claim_facts(claim(), [event(REFUSAL)])) is PrerequisitesReason.READ_WRITE_MANY_FAILED
    assert verdict_over(claim_facts(claim("Bound"))) is PrerequisitesReason.SATISFIED
    # A foreign claim, refused or bound, changes nothing.
    assert (
        verdict_over(claim_facts(foreign(claim()), [event(REFUSAL)]))
        is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    )
    assert (
        verdict_over(claim_facts(foreign(claim("Bound")))) is PrerequisitesReason.READ_WRITE_MANY_UNCONFIRMED
    )
