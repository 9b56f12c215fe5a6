"""stale_claims: only claims the module made, unreferenced on two passes a grace period apart, are
deleted; a claim the module did not make is never touched."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from deckhouse import hook

from support.values import module_values

KINDS = ["deployments", "statefulsets", "daemonsets", "jobs", "cronjobs", "pods"]
SINCE = "ai.deckhouse.io/unreferenced-since"
OWNER = "0b8c3f3e-1111-4a5e-9d41-5c2f0e7f6a10"
LONG_AGO = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
MODULE_LABELS = {
    "ai.deckhouse.io/shared-pvc": "true",
    "module": "ai-models",
    "ai.deckhouse.io/owner-uid": OWNER,
}


def claim(
    name: str,
    namespace: str = "team-a",
    *,
    since: str | None = None,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
    owners: list[str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "labels": MODULE_LABELS if labels is None else labels,
        "owners": [OWNER] if owners is None else owners,
        "deleting": deleting,
        "since": since,
    }


def workload(
    namespace: str, *claims: str, uid: str = "some-other-workload", owners: list[str] | None = None
) -> dict[str, Any]:
    return {"namespace": namespace, "uid": uid, "owners": owners or [], "claims": list(claims)}


def snapshots(kit: Any, claims: list[dict[str, Any]], **workloads: list[dict[str, Any]]) -> dict[str, Any]:
    result = {"shared_claims": kit.snapshot(*claims)}
    for kind in KINDS:
        result[kind] = kit.snapshot(*workloads.get(kind, []))
    return result


def deletion(name: str, namespace: str = "team-a") -> dict[str, Any]:
    return {
        "operation": "Delete",
        "kind": "PersistentVolumeClaim",
        "namespace": namespace,
        "name": name,
        "apiVersion": "v1",
    }


def marks(output: Any) -> dict[str, Any]:
    """(namespace/name) -> the unreferenced-since value each merge patch writes (None removes it)."""
    return {
        f"{op['namespace']}/{op['name']}": op["mergePatch"]["metadata"]["annotations"][SINCE]
        for op in output.kube_operations.data
        if op["operation"] == "MergePatch"
    }


def deletions(output: Any) -> list[dict[str, Any]]:
    return [op for op in output.kube_operations.data if op["operation"] == "Delete"]


def run(kit: Any, snaps: dict[str, Any]) -> Any:
    return hook.testrun(
        kit.load("stale_claims").main,
        binding_context=[kit.schedule("stale_claims", snaps)],
        initial_values=module_values(),
    )


def test_a_first_pass_only_records_when_a_claim_became_unreferenced(kit: Any) -> None:
    output = run(kit, snapshots(kit, [claim("orphan")]))
    assert deletions(output) == []
    [(where, since)] = marks(output).items()
    assert where == "team-a/orphan"
    assert dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(since) < dt.timedelta(minutes=1)


def test_a_claim_unreferenced_past_the_grace_period_is_deleted_and_referenced_ones_survive(kit: Any) -> None:
    # A paused Deployment scaled to zero still references its bound claim: the filter reads the pod
    # template, which pause and replicas do not change.
    snaps = snapshots(
        kit,
        [
            claim("paused-model", since=LONG_AGO),
            claim("orphan", since=LONG_AGO),
            claim("cron-model", since=LONG_AGO),
            claim("pod-model", since=LONG_AGO),
        ],
        deployments=[workload("team-a", "paused-model")],
        cronjobs=[workload("team-a", "cron-model")],
        pods=[workload("team-a", "pod-model", "scratch")],
    )
    output = run(kit, snaps)
    assert deletions(output) == [deletion("orphan")]
    # Referenced again: the record goes, so a later unreference waits the whole grace period.
    assert marks(output) == {"team-a/paused-model": None, "team-a/cron-model": None, "team-a/pod-model": None}
    assert output.values_patches.data == []


def test_a_claim_unreferenced_for_less_than_the_grace_period_stays(kit: Any) -> None:
    recent = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    output = run(kit, snapshots(kit, [claim("waiting", since=recent)]))
    assert output.kube_operations.data == []


@pytest.mark.parametrize(
    ("labels", "owners"),
    [
        ({"ai.deckhouse.io/shared-pvc": "true"}, [OWNER]),  # labelled by someone else
        ({**MODULE_LABELS, "module": "something-else"}, [OWNER]),
        ({k: v for k, v in MODULE_LABELS.items() if k != "ai.deckhouse.io/owner-uid"}, [OWNER]),
        (MODULE_LABELS, []),  # the owner-UID label without the ownerReference
        (MODULE_LABELS, ["another-uid"]),
    ],
)
def test_a_claim_the_module_did_not_make_is_never_touched(
    kit: Any, labels: dict[str, str], owners: list[str]
) -> None:
    output = run(kit, snapshots(kit, [claim("foreign", since=LONG_AGO, labels=labels, owners=owners)]))
    assert output.kube_operations.data == []


def test_a_claim_whose_owning_workload_exists_is_kept_while_its_delivery_waits(kit: Any) -> None:
    # The controller makes the claim before the template mounts it, and a blocked delivery keeps it.
    snaps = snapshots(kit, [claim("pending", since=LONG_AGO)], deployments=[workload("team-a", uid=OWNER)])
    output = run(kit, snaps)
    assert deletions(output) == []
    # The mark is the delivery controller's while the workload exists (D100): removing it would
    # restart the grace period of a claim the workload no longer uses, every 15 minutes, for ever.
    assert marks(output) == {}


@pytest.mark.parametrize("kind", KINDS)
def test_each_workload_kind_keeps_its_claim(kit: Any, kind: str) -> None:
    output = run(
        kit, snapshots(kit, [claim("model", since=LONG_AGO)], **{kind: [workload("team-a", "model")]})
    )
    assert deletions(output) == []


def test_reference_from_another_namespace_does_not_count(kit: Any) -> None:
    snaps = snapshots(
        kit,
        [claim("model", "team-a", since=LONG_AGO), claim("model", "team-b", since=LONG_AGO)],
        statefulsets=[workload("team-b", "model")],
    )
    assert deletions(run(kit, snaps)) == [deletion("model", "team-a")]


def test_deleting_claims_and_a_garbled_record_are_left_to_a_later_pass(kit: Any) -> None:
    snaps = snapshots(
        kit, [claim("going", since=LONG_AGO, deleting=True), claim("garbled", since="yesterday")]
    )
    output = run(kit, snaps)
    assert deletions(output) == []
    assert list(marks(output)) == ["team-a/garbled"]  # a record that is not a time starts anew


def test_no_claims_no_operations(kit: Any) -> None:
    snaps = snapshots(kit, [], deployments=[workload("team-a", "model")], pods=[workload("team-a")])
    assert run(kit, snaps).kube_operations.data == []


CLAIM_UID = "5d0c2a6e-2222-4b1f-8c3a-7e9f1d2c3b40"


def test_the_claims_own_materialize_job_and_its_pod_do_not_keep_an_orphaned_claim(kit: Any) -> None:
    # The workload went with --cascade=orphan: only the claim's Job (owned by the claim) and the
    # Job's Pod mount it, and both go with it.
    own_job = workload("team-a", "orphan", uid="job-uid", owners=[CLAIM_UID])
    snaps = snapshots(
        kit,
        [claim("orphan", since=LONG_AGO, uid=CLAIM_UID)],
        jobs=[own_job],
        pods=[workload("team-a", "orphan", uid="pod-uid", owners=["job-uid"])],
    )
    assert deletions(run(kit, snaps)) == [deletion("orphan")]


def test_a_first_pass_marks_a_claim_only_its_own_job_mounts(kit: Any) -> None:
    own_job = workload("team-a", "orphan", uid="job-uid", owners=[CLAIM_UID])
    output = run(kit, snapshots(kit, [claim("orphan", uid=CLAIM_UID)], jobs=[own_job]))
    assert list(marks(output)) == ["team-a/orphan"]


@pytest.mark.parametrize(
    ("claim_uid", "job_owners"),
    [
        (CLAIM_UID, ["someone-elses-uid"]),  # a Job of the user's that mounts the claim
        (CLAIM_UID, []),
        (None, [CLAIM_UID]),  # no uid in the snapshot: the claim's own Job cannot be told apart, so keep
    ],
)
def test_any_other_job_that_mounts_the_claim_keeps_it(
    kit: Any, claim_uid: str | None, job_owners: list[str]
) -> None:
    job = workload("team-a", "model", uid="job-uid", owners=job_owners)
    snaps = snapshots(kit, [claim("model", since=LONG_AGO, uid=claim_uid)], jobs=[job])
    assert deletions(run(kit, snaps)) == []
