"""The claims a workload no longer uses: one row per case of `superseded.release` (D100)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from ai_models.domain.conditions import timestamp
from ai_models.domain.delivery.claims import claim_labels, owner_reference
from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.delivery.superseded import ClaimChange, ClaimStep, candidates, release
from ai_models.domain.delivery.template import DeliveredModel, rewrite
from ai_models.names import MODULE_LABEL, SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
GRACE = datetime.timedelta(hours=1)
WEB = Workload(WorkloadKind.DEPLOYMENT, "team-a", "web", uid="uid-web")
OTHER = Workload(WorkloadKind.DEPLOYMENT, "team-a", "api", uid="uid-api")
USER_TEMPLATE: dict[str, Any] = {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}


def claim(name: str, *, of: Workload = WEB, mark: str | None = None, **meta: Any) -> dict[str, Any]:
    annotations = {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: mark} if mark is not None else {}
    return {
        "metadata": {
            "name": name,
            "namespace": of.namespace,
            "uid": f"uid-{name}",
            "labels": claim_labels(of),
            "ownerReferences": [owner_reference(of)],
            "annotations": annotations,
            **meta,
        }
    }


def delivering(name: str) -> dict[str, Any]:
    return rewrite(USER_TEMPLATE, claim=name, models=[DeliveredModel("qwen", "sha256:" + "a1" * 32)])


def pod(*claims: str) -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"volumes": volumes}}


def ago(delta: datetime.timedelta) -> str:
    return timestamp(NOW - delta)


@dataclasses.dataclass(frozen=True)
class Case:
    claims: list[dict[str, Any]]
    wanted: str | None
    template: dict[str, Any]
    pods: list[dict[str, Any]]
    steps: list[ClaimStep]
    recheck_in: datetime.timedelta | None


MARK_NOW = NOW.replace(microsecond=0)
CASES = {
    "the wanted claim is kept and unmarked": Case(
        [claim("new"), claim("new2", mark=ago(2 * GRACE))],
        "new2",
        delivering("new"),
        [],
        [ClaimStep("new2", "uid-new2", ClaimChange.UNMARK)],
        None,
    ),
    "a superseded claim is marked, not deleted, on its first observation": Case(
        [claim("new"), claim("old")],
        "new",
        delivering("new"),
        [],
        [ClaimStep("old", "uid-old", ClaimChange.MARK, since=MARK_NOW)],
        GRACE,
    ),
    "within the grace nothing happens; looked at again when it ends": Case(
        [claim("old", mark=ago(GRACE - datetime.timedelta(minutes=10)))],
        "new",
        delivering("new"),
        [],
        [],
        datetime.timedelta(minutes=10),
    ),
    "marked a grace period ago: deleted": Case(
        [claim("old", mark=ago(GRACE))],
        "new",
        delivering("new"),
        [],
        [ClaimStep("old", "uid-old", ClaimChange.DELETE, since=NOW - GRACE)],
        None,
    ),
    "a Pod still mounting it keeps it (a rollout under way) and loses the mark": Case(
        [claim("old", mark=ago(2 * GRACE))],
        "new",
        delivering("new"),
        [pod("new"), pod("old")],
        [ClaimStep("old", "uid-old", ClaimChange.UNMARK)],
        None,
    ),
    "the template's record keeps it while the new claim fills (template not rewritten yet)": Case(
        [claim("old", mark=ago(2 * GRACE)), claim("new")],
        "new",
        delivering("old"),
        [],
        [ClaimStep("old", "uid-old", ClaimChange.UNMARK)],
        None,
    ),
    "a volume the user's template names keeps it": Case(
        [claim("old")],
        None,
        {"spec": {"volumes": [{"name": "x", "persistentVolumeClaim": {"claimName": "old"}}]}},
        [],
        [],
        None,
    ),
    "annotations removed: every owned claim is marked": Case(
        [claim("a"), claim("b", mark=ago(2 * GRACE))],
        None,
        USER_TEMPLATE,
        [pod()],
        [
            ClaimStep("a", "uid-a", ClaimChange.MARK, since=MARK_NOW),
            ClaimStep("b", "uid-b", ClaimChange.DELETE, since=NOW - 2 * GRACE),
        ],
        GRACE,
    ),
    "a malformed mark counts as written now: rewritten, never deleted": Case(
        [claim("old", mark="yesterday")],
        "new",
        delivering("new"),
        [],
        [ClaimStep("old", "uid-old", ClaimChange.MARK, since=MARK_NOW)],
        GRACE,
    ),
    "a mark in the future counts as written now": Case(
        [claim("old", mark=timestamp(NOW + 5 * GRACE))],
        "new",
        delivering("new"),
        [],
        [ClaimStep("old", "uid-old", ClaimChange.MARK, since=MARK_NOW)],
        GRACE,
    ),
    "another workload's claim is never touched": Case(
        [claim("theirs", of=OTHER, mark=ago(2 * GRACE))], "new", delivering("new"), [], [], None
    ),
    "a claim the module did not make is never touched": Case(
        [
            {
                **claim("forged", mark=ago(2 * GRACE)),
                "metadata": {
                    **claim("forged", mark=ago(2 * GRACE))["metadata"],
                    "labels": {**claim_labels(WEB), MODULE_LABEL: "someone"},
                },
            },
            {**claim("unowned"), "metadata": {**claim("unowned")["metadata"], "ownerReferences": []}},
        ],
        "new",
        delivering("new"),
        [],
        [],
        None,
    ),
    "a claim being deleted is left to its deletion": Case(
        [claim("old", mark=ago(2 * GRACE), deletionTimestamp=ago(GRACE))],
        "new",
        delivering("new"),
        [],
        [],
        None,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_release(case: Case) -> None:
    got = release(
        case.claims,
        workload_uid=WEB.uid,
        wanted=case.wanted,
        template=case.template,
        pods=case.pods,
        now=NOW,
        grace=GRACE,
    )
    assert list(got.steps) == case.steps
    assert got.recheck_at == (None if case.recheck_in is None else MARK_NOW + case.recheck_in)


def test_mark_then_delete_needs_two_observations_even_without_grace() -> None:
    first = release(
        [claim("old")],
        workload_uid=WEB.uid,
        wanted="new",
        template={},
        pods=[],
        now=NOW,
        grace=datetime.timedelta(0),
    )
    assert [step.change for step in first.steps] == [ClaimChange.MARK]
    marked = claim("old", mark=timestamp(first.steps[0].since or NOW))
    second = release(
        [marked],
        workload_uid=WEB.uid,
        wanted="new",
        template={},
        pods=[],
        now=NOW,
        grace=datetime.timedelta(0),
    )
    assert [step.change for step in second.steps] == [ClaimChange.DELETE]


def test_patches_write_and_remove_the_mark() -> None:
    assert ClaimStep("c", "u", ClaimChange.MARK, since=NOW).patch() == {
        "metadata": {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: "2026-12-01T12:00:00Z"}}
    }
    assert ClaimStep("c", "u", ClaimChange.UNMARK).patch() == {
        "metadata": {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: None}}
    }


def test_marks_apply_only_to_the_claim_as_observed() -> None:
    """A pass that read a cache without an earlier pass's mark must not write a later mark over it."""
    verdict = release(
        [claim("old", resourceVersion="41")],
        workload_uid=WEB.uid,
        wanted="new",
        template=delivering("new"),
        pods=[],
        now=NOW,
        grace=GRACE,
    )
    assert [step.patch()["metadata"].get("resourceVersion") for step in verdict.steps] == ["41"]
    unmark = release(
        [claim("old", mark="2026-12-01T11:00:00Z", resourceVersion="42")],
        workload_uid=WEB.uid,
        wanted="old",
        template=delivering("old"),
        pods=[],
        now=NOW,
        grace=GRACE,
    )
    assert unmark.steps[0].patch() == {
        "metadata": {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: None}, "resourceVersion": "42"}
    }


def test_candidates_are_the_owned_claims_neither_wanted_nor_in_the_template() -> None:
    found = candidates(
        [claim("new"), claim("old"), claim("tpl"), claim("theirs", of=OTHER)],
        workload_uid=WEB.uid,
        wanted="new",
        template=delivering("tpl"),
    )
    assert [item["metadata"]["name"] for item in found] == ["old"]


def test_negative_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        release([], workload_uid="u", wanted=None, template={}, pods=[], now=NOW, grace=-GRACE)
