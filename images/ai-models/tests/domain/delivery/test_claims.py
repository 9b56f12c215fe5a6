"""Shared claims: name, labels, owner, size and class; and the one rule for deleting a stale one."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from ai_models.domain.delivery.claims import (
    GIB,
    Artifact,
    ClaimUser,
    ClaimVerdict,
    SharedClaim,
    Staleness,
    claim_manifest,
    claim_name,
    claim_referenced,
    claim_size,
    claim_size_bytes,
    claim_storage_class,
    claim_verdict,
    claims_mounted,
)
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.storage.prerequisites import PrerequisitesReason, StorageClassFacts, StorageInputs
from ai_models.names import (
    MODULE,
    MODULE_LABEL,
    OWNER_UID_LABEL,
    SHARED_CLAIM_PREFIX,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
)

WEB = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", "uid-web")
D1 = "sha256:" + "11" * 32
D2 = "sha256:" + "22" * 32
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
GRACE = datetime.timedelta(hours=1)


def test_the_claim_name_is_deterministic_per_workload_and_model_set() -> None:
    name = claim_name(WEB, [D1, D2])

    assert name == claim_name(WEB, [D2, D1, D1])
    assert name.startswith(f"{SHARED_CLAIM_PREFIX}web-")
    assert name != claim_name(WEB, [D1])
    assert name != claim_name(Workload(WorkloadKind.STATEFUL_SET, "team-a", "web", "uid-web"), [D1, D2])
    assert name != claim_name(Workload(WorkloadKind.DEPLOYMENT, "team-a", "api", "uid-web"), [D1, D2])


def test_the_claim_name_does_not_depend_on_the_uid_a_webhook_cannot_see_yet() -> None:
    assert claim_name(WEB, [D1]) == claim_name(Workload(WorkloadKind.DEPLOYMENT, "team-a", "web"), [D1])


@pytest.mark.parametrize("name", ["a" * 253, "my.app.v2", "x", "a-" * 40 + "b", "a." * 30 + "b"])
def test_a_long_or_dotted_workload_name_gives_a_dns_label_of_at_most_63_characters(name: str) -> None:
    result = claim_name(Workload(WorkloadKind.DEPLOYMENT, "team-a", name, "u"), [D1])

    assert len(result) <= 63
    assert DNS_LABEL.match(result), result


def test_names_sharing_their_first_characters_get_different_claims() -> None:
    first = Workload(WorkloadKind.DEPLOYMENT, "team-a", "a" * 60 + "1", "u")
    second = Workload(WorkloadKind.DEPLOYMENT, "team-a", "a" * 60 + "2", "u")

    assert claim_name(first, [D1]) != claim_name(second, [D1])


@pytest.mark.parametrize(
    ("sizes", "gib"),
    [
        ([0], 1),
        ([1], 2),  # 1 byte + 10 % + 1 GiB is over 1 GiB
        ([9 * GIB], 11),  # 9 + 0.9 + 1 = 10.9 -> 11
        ([10 * GIB], 12),  # 10 + 1 + 1
        ([5 * GIB, 5 * GIB], 12),
    ],
)
def test_the_size_is_the_artifacts_plus_ten_percent_plus_one_gib_rounded_up(
    sizes: list[int], gib: int
) -> None:
    artifacts = [Artifact(f"sha256:{index:064x}", size) for index, size in enumerate(sizes)]

    assert claim_size_bytes(artifacts) == gib * GIB
    assert claim_size(artifacts) == f"{gib}Gi"


def test_a_digest_two_models_share_is_counted_once() -> None:
    assert claim_size([Artifact(D1, 10 * GIB), Artifact(D1, 10 * GIB)]) == "12Gi"


def test_the_claim_is_read_write_many_labelled_and_owned_by_the_workload() -> None:
    manifest = claim_manifest(workload=WEB, artifacts=[Artifact(D1, 9 * GIB)], storage_class="nfs")

    assert manifest["metadata"]["name"] == claim_name(WEB, [D1])
    assert manifest["metadata"]["namespace"] == "team-a"
    labels = manifest["metadata"]["labels"]
    assert labels[SHARED_PVC_LABEL] == SHARED_PVC_LABEL_VALUE
    assert labels[OWNER_UID_LABEL] == "uid-web"
    assert labels[MODULE_LABEL] == MODULE
    assert manifest["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": "uid-web",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]
    assert manifest["spec"]["accessModes"] == ["ReadWriteMany"]
    assert manifest["spec"]["storageClassName"] == "nfs"
    assert manifest["spec"]["resources"] == {"requests": {"storage": "11Gi"}}


def test_a_cron_jobs_claim_is_owned_through_batch_v1() -> None:
    cron = Workload(WorkloadKind.CRON_JOB, "team-a", "nightly", "uid-c")

    manifest = claim_manifest(workload=cron, artifacts=[Artifact(D1, 1)], storage_class="nfs")

    assert manifest["metadata"]["ownerReferences"][0]["apiVersion"] == "batch/v1"


def test_no_claim_is_made_for_a_workload_without_its_uid() -> None:
    with pytest.raises(ValueError, match="Deployment team-a/web has no uid"):
        claim_manifest(
            workload=Workload(WorkloadKind.DEPLOYMENT, "team-a", "web"), artifacts=[], storage_class="x"
        )


def test_the_class_comes_from_the_prerequisites_resolution_chain() -> None:
    classes = (
        StorageClassFacts("nfs", is_default=True),
        StorageClassFacts("local", volume_binding_mode="WaitForFirstConsumer"),
    )

    default = claim_storage_class(StorageInputs(mode=DeliveryMode.SHARED_PVC, storage_classes=classes))
    setting = claim_storage_class(
        StorageInputs(mode=DeliveryMode.SHARED_PVC, shared_pvc_storage_class="local", storage_classes=classes)
    )
    missing = claim_storage_class(
        StorageInputs(mode=DeliveryMode.SHARED_PVC, global_storage_class="gone", storage_classes=classes)
    )

    assert (default.name, default.binding_mode, default.problem) == ("nfs", "Immediate", None)
    assert (setting.name, setting.binding_mode) == ("local", "WaitForFirstConsumer")
    assert missing.reason is PrerequisitesReason.STORAGE_CLASS_NOT_FOUND
    assert missing.problem is not None
    assert "StorageClass gone" in missing.problem


# ----- stale claims --------------------------------------------------------------------------------


def claim(**changes: Any) -> SharedClaim:
    labels = {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE, MODULE_LABEL: MODULE, OWNER_UID_LABEL: "uid-web"}
    labels.update(changes.pop("labels", {}))
    return SharedClaim(
        namespace="team-a",
        name="ai-models-web-0123456789",
        labels={key: value for key, value in labels.items() if value is not None},
        owner_uids=changes.pop("owner_uids", frozenset({"uid-web"})),
        **changes,
    )


def verdict(
    subject: SharedClaim, *, referenced: bool = False, since: datetime.datetime | None
) -> ClaimVerdict:
    return claim_verdict(subject, referenced=referenced, first_unreferenced=since, now=NOW, grace=GRACE)


STALE_RULES: dict[str, tuple[SharedClaim, bool, datetime.datetime | None, Staleness]] = {
    "a_claim_labelled_shared_but_not_by_the_module_is_never_touched": (
        claim(labels={MODULE_LABEL: None}),
        False,
        NOW - 10 * GRACE,
        Staleness.FOREIGN,
    ),
    "a_claim_whose_owner_uid_label_matches_no_owner_reference_is_never_touched": (
        claim(owner_uids=frozenset({"someone-else"})),
        False,
        NOW - 10 * GRACE,
        Staleness.FOREIGN,
    ),
    "a_claim_without_owner_uid_label_is_never_touched": (
        claim(labels={OWNER_UID_LABEL: None}),
        False,
        NOW - 10 * GRACE,
        Staleness.FOREIGN,
    ),
    "a_claim_without_the_shared_label_is_never_touched": (
        claim(labels={SHARED_PVC_LABEL: "false"}),
        False,
        NOW - 10 * GRACE,
        Staleness.FOREIGN,
    ),
    "a_referenced_claim_is_in_use_however_long_it_was_unreferenced_before": (
        claim(),
        True,
        NOW - 10 * GRACE,
        Staleness.IN_USE,
    ),
    "a_claim_being_deleted_is_left_to_finish": (
        claim(deleting=True),
        False,
        NOW - 10 * GRACE,
        Staleness.DELETING,
    ),
    "a_claim_is_never_deleted_on_its_first_unreferenced_observation": (
        claim(),
        False,
        None,
        Staleness.UNREFERENCED,
    ),
    "a_claim_within_the_grace_period_waits": (claim(), False, NOW - GRACE / 2, Staleness.UNREFERENCED),
    "a_claim_unreferenced_for_the_grace_period_is_stale": (claim(), False, NOW - GRACE, Staleness.STALE),
    "a_first_sighting_from_the_future_starts_over": (claim(), False, NOW + GRACE, Staleness.UNREFERENCED),
}


@pytest.mark.parametrize("rule", STALE_RULES)
def test_stale_claim_rule(rule: str) -> None:
    subject, referenced, since, expected = STALE_RULES[rule]

    assert verdict(subject, referenced=referenced, since=since).staleness is expected


def test_the_first_unreferenced_observation_is_remembered_and_rechecked_after_the_grace_period() -> None:
    first = verdict(claim(), since=None)
    later = claim_verdict(
        claim(), referenced=False, first_unreferenced=first.since, now=NOW + GRACE, grace=GRACE
    )

    assert (first.since, first.recheck_at, first.delete) == (NOW, NOW + GRACE, False)
    assert later.delete


def test_a_grace_period_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="grace period must be positive"):
        claim_verdict(claim(), referenced=False, first_unreferenced=NOW, now=NOW, grace=datetime.timedelta(0))


def test_a_claim_object_is_read_with_its_labels_owners_and_deletion() -> None:
    obj = {
        "metadata": {
            "namespace": "team-a",
            "name": "c",
            "labels": {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE},
            "ownerReferences": [{"uid": "u1"}, {"uid": "u2"}],
            "deletionTimestamp": "2026-12-01T12:00:00Z",
        }
    }

    assert SharedClaim.of(obj) == SharedClaim(
        "team-a", "c", {SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE}, frozenset({"u1", "u2"}), True
    )


def volumes(*claims: str) -> dict[str, Any]:
    return {
        "volumes": [
            {"name": "tmp", "emptyDir": {}},
            *(
                {"name": f"v{index}", "persistentVolumeClaim": {"claimName": c}}
                for index, c in enumerate(claims)
            ),
        ]
    }


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "Pod", "spec": volumes("a", "b")},
        {"kind": "Job", "spec": {"template": {"spec": volumes("a", "b")}}},
        {"kind": "Deployment", "spec": {"template": {"spec": volumes("a", "b")}}},
        {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": volumes("a", "b")}}}}},
    ],
)
def test_the_claims_a_pod_a_job_or_a_workload_mounts_are_its_references(obj: dict[str, Any]) -> None:
    assert claims_mounted(obj) == {"a", "b"}


def test_an_object_without_volumes_mounts_nothing() -> None:
    assert claims_mounted({"kind": "StatefulSet", "spec": {}}) == frozenset()


CLAIM_UID = "uid-claim"
OWN_JOB = ClaimUser("team-a", "uid-job", frozenset({"ai-models-web-0123456789"}), frozenset({CLAIM_UID}))
OWN_JOB_POD = ClaimUser("team-a", "uid-pod", OWN_JOB.claims, frozenset({"uid-job"}))


def test_the_claims_own_materialize_job_and_its_pods_do_not_keep_it() -> None:
    # The Job is owned by the claim and mounts it; counting it would keep an orphaned claim for ever.
    assert not claim_referenced(
        claim(owner_uids=frozenset({"uid-web"}), uid=CLAIM_UID), [OWN_JOB, OWN_JOB_POD]
    )


@pytest.mark.parametrize(
    ("users", "uid"),
    [
        ([ClaimUser("team-a", "uid-user-job", OWN_JOB.claims)], CLAIM_UID),  # a user's Job mounts it
        ([OWN_JOB, ClaimUser("team-a", "uid-web", frozenset())], CLAIM_UID),  # its workload exists
        ([OWN_JOB, OWN_JOB_POD], ""),  # the claim's uid is unknown: its Job cannot be told apart
        # owned by another claim: only the claim's own things are discounted
        ([ClaimUser("team-a", "uid-job-2", OWN_JOB.claims, frozenset({"uid-other-claim"}))], CLAIM_UID),
    ],
)
def test_anything_else_that_mounts_the_claim_or_owns_it_keeps_it(users: list[ClaimUser], uid: str) -> None:
    assert claim_referenced(claim(uid=uid), users)


def test_references_from_another_namespace_do_not_count() -> None:
    elsewhere = [
        ClaimUser("team-b", "uid-web", OWN_JOB.claims),
        ClaimUser("team-b", "uid-job", OWN_JOB.claims),
    ]

    assert not claim_referenced(claim(uid=CLAIM_UID), elsewhere)
