"""The shared claims a workload no longer uses: marked first, deleted after a grace period (D100).

A workload owns a claim per model set it has delivered (D84: another model set, or a model
re-published with a new digest, is a new claim). The delivery controller knows which claim the
workload wants now, so its reconcile, not the orphan pass (D152), takes back the ones it superseded and the
ones of a workload whose annotations were removed. The rule, for each claim the workload owns
(`claims.made_by_module` and the owner-UID label equal to the workload's uid; one being deleted is
left to its deletion):

- referenced (the wanted claim, one the current pod template mounts, by the module's record
  `template.applied` or a volume of its own, or one a Pod of the workload mounts): kept, and a
  mark it carries is removed;
- unreferenced and unmarked: marked now (`ai.deckhouse.io/unreferenced-since`, RFC 3339);
- unreferenced and marked at least the grace period ago: deleted;
- unreferenced and marked later than that: kept, looked at again when the grace ends.

Nothing is deleted on a single observation: the mark is written by one pass and read by a later
one. A mark that cannot be read, or one in the future, counts as written now (it is rewritten): a
value nobody can read is never a reason to delete.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from ai_models.domain.conditions import parse_timestamp, timestamp
from ai_models.domain.delivery.claims import SharedClaim, claims_mounted, made_by_module
from ai_models.domain.delivery.template import applied
from ai_models.names import OWNER_UID_LABEL, SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION


class ClaimChange(enum.StrEnum):
    MARK = "Mark"  # write the annotation: unreferenced since `since`
    UNMARK = "Unmark"  # referenced again: remove the annotation
    DELETE = "Delete"


@dataclasses.dataclass(frozen=True)
class ClaimStep:
    claim: str
    uid: str  # the claim's own uid: a delete is conditional on it
    change: ClaimChange
    since: datetime.datetime | None = None  # MARK: the time written; DELETE: the mark read
    # The claim as observed: a MARK or UNMARK applies only to it, so a pass that read a cache not yet
    # showing an earlier pass's mark gets a conflict instead of writing a later mark over it (which
    # would restart the grace period).
    resource_version: str = ""

    def patch(self) -> dict[str, Any]:
        """The claim's metadata merge patch of a MARK or UNMARK, conditional on `resource_version`."""
        value = timestamp(self.since) if self.change is ClaimChange.MARK and self.since else None
        metadata: dict[str, Any] = {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: value}}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {"metadata": metadata}


@dataclasses.dataclass(frozen=True)
class Release:
    """What to do with a workload's claims, and when to look again (None: on its next event)."""

    steps: tuple[ClaimStep, ...] = ()
    recheck_at: datetime.datetime | None = None


def owned(claims: Iterable[Mapping[str, Any]], *, workload_uid: str) -> list[Mapping[str, Any]]:
    """The claims the module made for the workload with this uid."""
    found = []
    for obj in claims:
        claim = SharedClaim.of(obj)
        if workload_uid and made_by_module(claim) and claim.labels.get(OWNER_UID_LABEL) == workload_uid:
            found.append(obj)
    return found


def template_claims(template: Mapping[str, Any]) -> frozenset[str]:
    """The claims a pod template mounts: the module's record, and its volumes."""
    record = applied(template)
    return claims_mounted(template) | ({record.claim} if record is not None and record.claim else set())


def candidates(
    claims: Iterable[Mapping[str, Any]], *, workload_uid: str, wanted: str | None, template: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The owned claims that only a Pod could still keep: a caller lists the Pods only if any."""
    kept = template_claims(template) | ({wanted} if wanted else set())
    return [obj for obj in owned(claims, workload_uid=workload_uid) if SharedClaim.of(obj).name not in kept]


def release(
    claims: Iterable[Mapping[str, Any]],
    *,
    workload_uid: str,
    wanted: str | None,
    template: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    now: datetime.datetime,
    grace: datetime.timedelta,
) -> Release:
    """The marks and deletions for the claims `workload_uid` owns among `claims`.

    `wanted`: the claim of the workload's current request (None when it asks for nothing, or while
    it is not delivered: then nothing it owns is superseded yet, and the caller does not ask);
    `template`: its current pod template; `pods`: its Pods (what they mount keeps a claim)."""
    if grace < datetime.timedelta(0):
        raise ValueError(f"the grace period must not be negative, not {grace}")
    referenced = set(template_claims(template)) | ({wanted} if wanted else set())
    for pod in pods:
        referenced |= claims_mounted(pod)
    steps: list[ClaimStep] = []
    recheck: datetime.datetime | None = None
    for obj in owned(claims, workload_uid=workload_uid):
        claim = SharedClaim.of(obj)
        if claim.deleting:
            continue
        metadata = obj.get("metadata") or {}
        value = (metadata.get("annotations") or {}).get(SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION)
        version = str(metadata.get("resourceVersion") or "")
        if claim.name in referenced:
            if value is not None:
                steps.append(ClaimStep(claim.name, claim.uid, ClaimChange.UNMARK, resource_version=version))
            continue
        since = parse_timestamp(value)
        if since is None or since > now:
            since = now.replace(microsecond=0)  # as written: the next pass reads this very time
            steps.append(
                ClaimStep(claim.name, claim.uid, ClaimChange.MARK, since=since, resource_version=version)
            )
        elif now - since >= grace:
            steps.append(ClaimStep(claim.name, claim.uid, ClaimChange.DELETE, since=since))
            continue
        due = since + grace
        recheck = due if recheck is None else min(recheck, due)
    return Release(tuple(steps), recheck)
