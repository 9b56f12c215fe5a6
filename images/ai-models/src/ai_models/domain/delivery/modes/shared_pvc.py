"""SharedPVC delivery: one ReadWriteMany claim per workload and model set, filled by a
materialization Job, mounted read-only by every pod (`verdict.ModeRules`). The rules, in order:

- A workload whose own template has an inline volume of the module's CSI driver can only work in
  NodeCache mode: `NodeCacheDeliveryDisabled` (D110). A workload without a name yet (admission of
  `generateName`) has no claim name: its pods wait and the controller finishes the template.
- A claim is made only for a class that exists and binds at once: a missing class is
  `SharedPVCStorageClassMissing`, a WaitForFirstConsumer class is named at once
  (`SharedPVCStorageClassWaitForFirstConsumer`) and no claim is made, since it would never bind
  before its first consumer and that consumer waits for the claim's contents. Once a claim exists,
  the class no longer matters: a later change of the settings does not block a working delivery.
- A Pending claim reports its provisioner's failure (`SharedPVCProvisioningFailed`, verbatim),
  else waits until `provisioning_deadline` after its creation (`SharedPVCClaimPending`), then is
  `SharedPVCProvisioningTimedOut`; a Lost claim or one whose PersistentVolume is gone is
  `SharedPVCVolumeLost`.
- A Bound claim is filled by one materialization Job when a slot is free (at most
  `delivery.maxConcurrentMaterializations` in the cluster), else waits for one; both are
  `SharedPVCMaterializing`. A failed Job is `SharedPVCMaterializationFailed` and is tried again
  `materialization_retry` after it ended. A Job that succeeded is recorded on the claim
  (`ai.deckhouse.io/materialized-digests`), so the claim, not the Job, remembers its contents.
- A claim that holds every digest delivers: the template is rewritten, the report is `Delivered`.

Every verdict once the models are Ready carries the complete template (`rewrite` for the claim), so
admission writes it complete and gated and the controller then removes the gate from the Pods
instead of changing the template: a Deployment created for Ready models keeps one ReplicaSet.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any, Final

from ai_models.domain.conditions import timestamp
from ai_models.domain.delivery.claim_facts import ClaimFacts, ClaimSeen
from ai_models.domain.delivery.claims import (
    Artifact,
    claim_labels,
    claim_manifest,
    claim_name,
    claim_size,
    made_by_module,
    owner_reference,
)
from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.effects import (
    CreateClaim,
    Effect,
    PatchClaim,
    RemoveJob,
    StartMaterialization,
    WaitForSlot,
)
from ai_models.domain.delivery.report import DeliveryReport
from ai_models.domain.delivery.template import Template, driver_volumes, rewrite, strip
from ai_models.domain.delivery.verdict import (
    DeliveryObservation,
    Verdict,
    conclude,
    problem_warning,
    unless_kept,
    waiting_warning,
)
from ai_models.domain.delivery.workload_models import ResolvedModel, described
from ai_models.domain.jobs import JobState
from ai_models.domain.storage.prerequisites import IMMEDIATE, ClaimPhase
from ai_models.names import (
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODELS_DIR,
    NODE_CACHE_DRIVER,
    OWNER_UID_LABEL,
    DeliveryReason,
)

# Events are read, not watched: a claim that waits for its provisioner is looked at this often.
EVENTS_RECHECK_SECONDS: Final = 15.0
# A freed slot should wake the waiting workloads; this bounds the wait if that wake-up is lost.
SLOT_RECHECK_SECONDS: Final = 30.0
# A Job being deleted is looked at again this soon: its successor starts once it is gone.
JOB_GONE_SECONDS: Final = 1.0
FILLING: Final = waiting_warning("its shared volume is being filled")

Seen = DeliveryObservation[ClaimFacts]


@dataclasses.dataclass(frozen=True)
class Policy:
    provisioning_deadline: datetime.timedelta
    materialization_retry: datetime.timedelta


@dataclasses.dataclass(frozen=True)
class _Case:
    """One SharedPVC verdict being made: the observation, the models and the template they get."""

    seen: Seen
    resolved: tuple[ResolvedModel, ...]
    claim_name: str
    complete: Template

    def verdict(
        self,
        rule: str,
        reason: DeliveryReason,
        message: str,
        *,
        before: Sequence[Effect] = (),
        requeue: float | None = None,
    ) -> Verdict:
        """A verdict of a delivery that is not complete yet: the template stays as it is."""
        return conclude(
            self.seen,
            rule,
            DeliveryReport(reason, message),
            before=before,
            requeue=requeue,
            complete=self.complete,
            warning=FILLING,
        )

    @property
    def copying(self) -> str:
        return f"{described(self.resolved)} into the shared claim {self.claim_name}"


@dataclasses.dataclass(frozen=True)
class SharedPVC:
    """The SharedPVC rules with the settings they need."""

    policy: Policy

    def admission_facts(self, facts: ClaimFacts) -> ClaimFacts:
        return facts

    def before_models(self, seen: Seen, request: DeliveryRequest) -> Verdict | None:
        disabled = node_cache_needed(seen.template)
        if disabled is not None:
            return conclude(
                seen,
                "node_cache_delivery_disabled",
                DeliveryReport(DeliveryReason.NODE_CACHE_DELIVERY_DISABLED, disabled),
                warning=problem_warning(disabled),
            )
        if not seen.workload.name:
            why = "the workload has no name yet (generateName)"
            return conclude(
                seen,
                "waiting_for_a_name",
                DeliveryReport(
                    DeliveryReason.SHARED_PVC_CLAIM_PENDING,
                    f"{why}: its shared claim is named once it has one",
                ),
                warning=waiting_warning(why),
            )
        return None

    def deliver(
        self,
        seen: Seen,
        request: DeliveryRequest,
        resolved: tuple[ResolvedModel, ...],
        *,
        now: datetime.datetime,
    ) -> Verdict:
        name = claim_name(request.workload, (item.digest for item in resolved))
        claim = seen.facts.claim
        if claim is not None and claim.name != name:
            raise ValueError(f"observed claim {claim.name} is not the claim {name} of the current model set")
        complete = rewrite(seen.template, claim=name, models=[item.delivered for item in resolved])
        case = _Case(seen, resolved, name, complete)
        if claim is None:
            return _no_claim(case, request)
        return _claim(case, claim, policy=self.policy, now=now)


def node_cache_needed(template: Any) -> str | None:
    """Why the user's own pod template can only work in NodeCache mode (it has an inline volume of
    the module's CSI driver, which only NodeCache mode installs), None if not."""
    volumes = driver_volumes(strip(template))
    if not volumes:
        return None
    return (
        f"the pod template has its own inline volume {', '.join(sorted(volumes))} of the CSI driver "
        f"{NODE_CACHE_DRIVER}, which exists only when delivery.mode is NodeCache (now SharedPVC); switch "
        "delivery.mode to NodeCache, or remove the volume (the annotations alone deliver the models)"
    )


def _no_claim(case: _Case, request: DeliveryRequest) -> Verdict:
    storage = case.seen.facts.storage
    name = case.claim_name
    if storage.problem is not None or storage.name is None:
        return case.verdict(
            "no_storage_class",
            DeliveryReason.SHARED_PVC_STORAGE_CLASS_MISSING,
            f"no StorageClass for the shared claim {name}: {storage.problem or 'none resolved'}",
        )
    if storage.binding_mode != IMMEDIATE:
        return case.verdict(
            "wait_for_first_consumer_named_before_any_claim",
            DeliveryReason.SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER,
            f"StorageClass {storage.name} binds volumes only for a first consumer (volumeBindingMode "
            f"{storage.binding_mode}), and the workload's pods wait for the claim's contents, so no "
            "claim is made; set delivery.sharedPVCStorageClassName to a ReadWriteMany class with "
            "volumeBindingMode Immediate",
        )
    artifacts = [Artifact(item.digest, item.size_bytes) for item in case.resolved]
    manifest = claim_manifest(workload=request.workload, artifacts=artifacts, storage_class=storage.name)
    return case.verdict(
        "create_claim",
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        f"creating the shared claim {name} ({claim_size(artifacts)}, ReadWriteMany, StorageClass "
        f"{storage.name}) for {described(case.resolved)}",
        before=(CreateClaim(manifest),),
    )


def _claim(case: _Case, claim: ClaimSeen, *, policy: Policy, now: datetime.datetime) -> Verdict:
    workload = case.seen.workload
    if not made_by_module(claim.shared):
        return case.verdict(
            "foreign_claim_with_the_wanted_name",
            DeliveryReason.INVALID_SPEC,
            f"the PersistentVolumeClaim {workload.namespace}/{claim.name} has the name of this workload's "
            "shared claim but was not created by the module, which leaves it alone; delete or rename it",
        )
    # A workload being created has no uid yet: it cannot tell an earlier incarnation's claim from
    # its own, and admits what the claim holds; the controller takes the claim over once it has one.
    if workload.uid and claim.labels.get(OWNER_UID_LABEL) != workload.uid:
        if claim.deleting:
            return case.verdict(
                "earlier_incarnations_claim_going",
                DeliveryReason.SHARED_PVC_CLAIM_PENDING,
                f"the shared claim {claim.name} of an earlier {workload.kind} {workload.name} is being "
                "deleted; a new one is made once it is gone",
            )
        # The same kind and name in the same namespace: an earlier incarnation of this workload,
        # gone (only one object has a name). Its contents are still good: take the claim over.
        patch = {
            "metadata": {"labels": claim_labels(workload), "ownerReferences": [owner_reference(workload)]}
        }
        return case.verdict(
            "adopt_earlier_incarnations_claim",
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            f"taking over the shared claim {claim.name} of an earlier {workload.kind} {workload.name}",
            before=(PatchClaim(patch),),
        )
    if claim.deleting:
        return case.verdict(
            "claim_going",
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            f"the shared claim {claim.name} is being deleted; a new one is made once it is gone",
        )
    if claim.phase is ClaimPhase.LOST or (claim.phase is ClaimPhase.BOUND and not claim.volume_exists):
        volume = f"PersistentVolume {claim.volume_name}" if claim.volume_name else "PersistentVolume"
        return case.verdict(
            "volume_lost",
            DeliveryReason.SHARED_PVC_VOLUME_LOST,
            f"the shared claim {claim.name}{_of_class(claim)} lost its {volume}, and the copied models with "
            f"it; delete the claim (kubectl -n {workload.namespace} delete pvc {claim.name}) and restart the "
            "workload's pods, which hold it until they stop; the module then makes a new one and copies "
            "the models again",
        )
    if claim.phase is not ClaimPhase.BOUND:
        return _pending(case, claim, policy=policy, now=now)
    return _bound(case, claim, policy=policy, now=now)


def _of_class(claim: ClaimSeen) -> str:
    return f" (StorageClass {claim.storage_class})" if claim.storage_class else ""


def _pending(case: _Case, claim: ClaimSeen, *, policy: Policy, now: datetime.datetime) -> Verdict:
    failure = case.seen.facts.provisioning_failure
    if failure:
        return case.verdict(
            "provisioning_failed",
            DeliveryReason.SHARED_PVC_PROVISIONING_FAILED,
            f"the provisioner cannot make a volume for the shared claim {claim.name}{_of_class(claim)}: "
            f"{failure}; fix the StorageClass or its provisioner (shared claims need ReadWriteMany), the "
            "claim binds once it can",
            requeue=EVENTS_RECHECK_SECONDS,
        )
    deadline = claim.created + policy.provisioning_deadline
    if now >= deadline:
        return case.verdict(
            "provisioning_timed_out",
            DeliveryReason.SHARED_PVC_PROVISIONING_TIMED_OUT,
            f"the shared claim {claim.name}{_of_class(claim)} is not bound "
            f"{_duration(policy.provisioning_deadline)} after it was made and its provisioner reported "
            "nothing; check that the StorageClass's provisioner runs and makes ReadWriteMany volumes, the "
            "claim binds once it can",
            requeue=EVENTS_RECHECK_SECONDS,
        )
    return case.verdict(
        "claim_pending",
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        f"waiting for the shared claim {claim.name}{_of_class(claim)} to be bound (reported as timed out "
        f"at {timestamp(deadline)})",
        requeue=min(EVENTS_RECHECK_SECONDS, (deadline - now).total_seconds()),
    )


def _bound(case: _Case, claim: ClaimSeen, *, policy: Policy, now: datetime.datetime) -> Verdict:
    facts = case.seen.facts
    job = facts.materialization
    done = holds_every_artifact(claim, case.resolved)
    if done or job.state is JobState.SUCCEEDED:
        return _delivered(case, claim, done=done)
    if job.state is JobState.RUNNING:
        return case.verdict(
            "materializing", DeliveryReason.SHARED_PVC_MATERIALIZING, f"copying {case.copying}"
        )
    if job.state is JobState.GOING_AWAY:
        return case.verdict(
            "materialization_job_going",
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            f"the previous Job copying {case.copying} is being removed; a new one starts once it is gone",
            requeue=JOB_GONE_SECONDS,
        )
    if job.state is JobState.FAILED:
        again = (job.finished or now) + policy.materialization_retry
        failure = f"copying {case.copying} failed: {job.message or 'the Job ended without a message'}"
        if now >= again:
            return case.verdict(
                "materialization_retried",
                DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
                f"{failure}; trying again now",
                before=(RemoveJob(finished=False),),
                requeue=JOB_GONE_SECONDS,
            )
        return case.verdict(
            "materialization_failed",
            DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
            f"{failure}; the module tries again at {timestamp(again)}, or at once when the Job is deleted",
            requeue=(again - now).total_seconds(),
        )
    if facts.materializations_running >= facts.materializations_limit:
        return case.verdict(
            "waiting_for_a_materialization_slot",
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            f"waiting for a materialization slot to copy {case.copying}: {facts.materializations_running} "
            f"of {facts.materializations_limit} running in the cluster "
            "(delivery.maxConcurrentMaterializations)",
            before=(WaitForSlot(),),
            requeue=SLOT_RECHECK_SECONDS,
        )
    return case.verdict(
        "start_materialization",
        DeliveryReason.SHARED_PVC_MATERIALIZING,
        f"started copying {case.copying}",
        before=(StartMaterialization(claim.name, case.resolved),),
    )


def _delivered(case: _Case, claim: ClaimSeen, *, done: bool) -> Verdict:
    """The claim holds every artifact (or its Job just copied them, which the claim then records)."""
    job = case.seen.facts.materialization
    before: list[Effect] = []
    if not done:
        digests = ",".join(sorted({item.digest for item in case.resolved}))
        before.append(PatchClaim({"metadata": {"annotations": {MATERIALIZED_DIGESTS_ANNOTATION: digests}}}))
    elif job.state in (JobState.SUCCEEDED, JobState.FAILED):
        # The claim records what the finished Job copied: the Job, its Pods and its Secrets (the
        # delivery token and the image pull copy) are no longer needed.
        before.append(RemoveJob(finished=True))
    return conclude(
        case.seen,
        "delivered",
        DeliveryReport(
            DeliveryReason.DELIVERED,
            f"{described(case.resolved)} delivered from the shared claim {claim.name}, read-only under "
            f"{MODELS_DIR}",
        ),
        before=before,
        template=unless_kept(case.seen.template, case.complete),
        ungate=True,
        release=True,
        wanted_claim=claim.name,
        complete=case.complete,
    )


def holds_every_artifact(claim: ClaimSeen | None, resolved: Sequence[ResolvedModel]) -> bool:
    """Whether the claim holds every artifact (its record), usable as it is."""
    return (
        claim is not None
        and made_by_module(claim.shared)
        and not claim.deleting
        and claim.phase is ClaimPhase.BOUND
        and claim.volume_exists
        and {item.digest for item in resolved} <= claim.materialized
    )


def _duration(value: datetime.timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"
