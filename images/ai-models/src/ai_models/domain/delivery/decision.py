"""What one reconcile of a workload does for its models: a pure decision, in either delivery mode.

The controller reads the workload and its request (`contract.parse`), each named model, the class a
new claim would get, the claim named for the current model set (`wanted_claim`) with its
PersistentVolume, the ProvisioningFailed message about that very claim (`provisioning_failure`),
the materialization Job of that claim and the cluster's materialization slots, and hands them to
`decide`. The answer is one action: the report, the pod template to write (only when it differs),
what to create or patch, and when to look again. The rules, in order:

- The module's own namespace is ignored. Without the annotations, everything the module added to
  the template and the report go (`template.strip`); the claims go after a grace period
  (`superseded.release`, run by the controller in this state and once Delivered, D100).
- A broken request is `InvalidSpec`; a model that is missing or not Ready is `ModelNotReady`.
- NodeCache mode (`_node_cache`) needs neither claim nor Job: a user nodeSelector entry that sets a
  key of the placement (`placement.placement`) to another value is `InvalidSpec`; models that do
  not fit one node's cache are `InsufficientNodeCacheCapacity` (`placement.capacity_problem`);
  otherwise the template gets one inline CSI volume per model and the placement, and is
  `Delivered` at once: pods start, and kubelet's NodePublishVolume waits for the node's cache.
- SharedPVC mode: a workload whose own template has an inline volume of the module's CSI driver can
  only work in NodeCache mode: `NodeCacheDeliveryDisabled` (D110). Then, for SharedPVC:
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

Admission (`admit`) writes the template complete as soon as every model is Ready; until the claim
is filled it keeps the gate, and the controller then removes the gate from the Pods
(`ungate_pods`) instead of changing the template, so a Deployment created for Ready models keeps
one ReplicaSet. A template gated for a model that was not Ready is finished by `decide` (a second
ReplicaSet, which the controller removes once the new one is available).

A stopped or blocked delivery never takes anything away: the template keeps the claim it mounts
(pods that run keep running), no claim is ever deleted here (only the stale-claim cleanup deletes,
`claims.claim_verdict`), and fixing the cause returns to `Delivered` with no change to the workload.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ai_models.domain.conditions import parse_timestamp, timestamp
from ai_models.domain.delivery.claims import (
    Artifact,
    ClassChoice,
    SharedClaim,
    claim_labels,
    claim_manifest,
    claim_name,
    claim_size,
    made_by_module,
    owner_reference,
)
from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, Workload, ignored
from ai_models.domain.delivery.placement import NodeCacheSeen, capacity_problem
from ai_models.domain.delivery.report import REPORT_ANNOTATIONS, DeliveryReport, provisioner_text
from ai_models.domain.delivery.template import (
    CachedModel,
    DeliveredModel,
    Template,
    applied,
    driver_volumes,
    gate,
    node_selector_conflicts,
    rewrite,
    rewrite_for_node_cache,
    strip,
)
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import IMMEDIATE, ClaimPhase, DeliveryMode
from ai_models.names import (
    MATERIALIZED_DIGESTS_ANNOTATION,
    MODELS_DIR,
    NODE_CACHE_DRIVER,
    OWNER_UID_LABEL,
    DeliveryReason,
    ModelPhase,
)

# Events are read, not watched: a claim that waits for its provisioner is looked at this often.
EVENTS_RECHECK_SECONDS: Final = 15.0
# A freed slot should wake the waiting workloads; this bounds the wait if that wake-up is lost.
SLOT_RECHECK_SECONDS: Final = 30.0
# A Job being deleted is looked at again this soon: its successor starts once it is gone.
JOB_GONE_SECONDS: Final = 1.0
PROVISIONING_FAILED_EVENT: Final = "ProvisioningFailed"
CLAIM_KIND: Final = "PersistentVolumeClaim"
# The rule of a workload whose annotations are gone; with `Delivered`, the steady states in which the
# controller takes back the claims the workload no longer uses (D100).
ANNOTATIONS_REMOVED: Final = "annotations_removed"


# ----- observation ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelSeen:
    """A named Model or ClusterModel as read: `phase` None when it does not exist."""

    key: ModelKey
    phase: ModelPhase | None
    digest: str = ""
    size_bytes: int | None = None

    @classmethod
    def of(cls, key: ModelKey, obj: Mapping[str, Any] | None) -> ModelSeen:
        """The object as the API server returned it (None: it does not exist); a phase this version
        does not know counts as Pending, a malformed status as an empty one. The delivery controller,
        the admission webhook and the node plugin's authorization all read a Model this way."""
        if obj is None:
            return cls(key, None)
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        phase_text = str(status.get("phase") or ModelPhase.PENDING.value)
        phase = ModelPhase(phase_text) if phase_text in tuple(ModelPhase) else ModelPhase.PENDING
        artifact = status.get("artifact")
        artifact = artifact if isinstance(artifact, Mapping) else {}
        digest, size = artifact.get("digest"), artifact.get("sizeBytes")
        return cls(
            key,
            phase,
            digest=digest if isinstance(digest, str) else "",
            size_bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )


@dataclasses.dataclass(frozen=True)
class ClaimSeen:
    """The claim named for the workload's current model set."""

    name: str
    uid: str
    phase: ClaimPhase
    created: datetime.datetime
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    owner_uids: frozenset[str] = frozenset()
    storage_class: str | None = None
    volume_name: str = ""
    volume_exists: bool = True  # the PersistentVolume `volume_name` exists
    deleting: bool = False
    materialized: frozenset[str] = frozenset()  # digests whose materialization succeeded on it

    @property
    def shared(self) -> SharedClaim:
        return SharedClaim("", self.name, self.labels, self.owner_uids, self.deleting)

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, volume_exists: bool) -> ClaimSeen:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        shared = SharedClaim.of(obj)
        recorded = str((meta.get("annotations") or {}).get(MATERIALIZED_DIGESTS_ANNOTATION) or "")
        phase_text = str((obj.get("status") or {}).get("phase") or "")
        return cls(
            name=shared.name,
            uid=str(meta.get("uid") or ""),
            phase=ClaimPhase(phase_text) if phase_text in tuple(ClaimPhase) else ClaimPhase.PENDING,
            created=parse_timestamp(meta.get("creationTimestamp"))
            or datetime.datetime.min.replace(tzinfo=datetime.UTC),
            labels=shared.labels,
            owner_uids=shared.owner_uids,
            storage_class=spec.get("storageClassName") or None,
            volume_name=str(spec.get("volumeName") or ""),
            volume_exists=volume_exists,
            deleting=shared.deleting,
            materialized=frozenset(item for item in recorded.split(",") if item),
        )


class JobState(enum.StrEnum):
    NONE = "None"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    GOING_AWAY = "GoingAway"  # deleted, not gone yet


@dataclasses.dataclass(frozen=True)
class MaterializationSeen:
    """The materialization Job of the claim: `message` is the materializer's own termination
    message of a failed Job (never a remote body), `finished` when it ended."""

    state: JobState = JobState.NONE
    message: str = ""
    finished: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class Policy:
    provisioning_deadline: datetime.timedelta
    materialization_retry: datetime.timedelta


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeliveryObservation:
    """`mode`: delivery.mode; `node_cache`: its settings and selected Nodes (NodeCache mode only);
    the claim, Job and storage fields are SharedPVC's."""

    workload: Workload
    mode: DeliveryMode = DeliveryMode.SHARED_PVC
    node_cache: NodeCacheSeen = dataclasses.field(default_factory=NodeCacheSeen)
    annotations: Mapping[str, Any]  # of the workload object: the report it carries
    template: Mapping[str, Any]  # the pod template as it is
    request: DeliveryRequest | InvalidSpec | None
    models: Mapping[ModelKey, ModelSeen] = dataclasses.field(default_factory=dict)
    storage: ClassChoice = dataclasses.field(default_factory=lambda: ClassChoice(None))
    claim: ClaimSeen | None = None
    provisioning_failure: str | None = None  # from `provisioning_failure`: about this claim's uid only
    materialization: MaterializationSeen = MaterializationSeen()
    materializations_running: int = 0
    materializations_limit: int = 2


# ----- action --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A requested model that is Ready, with the artifact it delivers."""

    key: ModelKey
    digest: str
    size_bytes: int

    @property
    def delivered(self) -> DeliveredModel:
        return DeliveredModel(self.key.name, self.digest)

    @property
    def cached(self) -> CachedModel:
        return CachedModel(self.key, self.digest)


@dataclasses.dataclass(frozen=True)
class StartMaterialization:
    claim: str
    models: tuple[ResolvedModel, ...]


@dataclasses.dataclass(frozen=True)
class DeliveryAction:
    """`report` None removes the report; `template` None leaves the template as it is (otherwise it
    differs from the current one); `claim_patch` is a merge patch of the existing claim's metadata;
    `requeue` is seconds until the workload is looked at again (None: on its next event)."""

    rule: str
    report: DeliveryReport | None
    template: Template | None = None
    create_claim: dict[str, Any] | None = None
    claim_patch: dict[str, Any] | None = None
    start_materialization: StartMaterialization | None = None
    remove_failed_job: bool = False
    # The claim records what the finished Job copied: the Job, its Pods and its Secrets (the
    # delivery token and the image pull copy) are no longer needed.
    remove_finished_job: bool = False
    # Remove the delivery gate from the workload's Pods that carry it: the content is there (or the
    # workload no longer asks for models), and a pod template that keeps the gate, like one the
    # admission webhook wrote complete at CREATE, must not be changed for it (a new ReplicaSet).
    ungate_pods: bool = False
    requeue: float | None = None


# ----- observation helpers -------------------------------------------------------------------------


def resolved_models(
    request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]
) -> tuple[ResolvedModel, ...] | None:
    """Every requested model with its artifact, or None while one of them is not deliverable."""
    found = []
    for key in request.keys:
        seen = models.get(key)
        if seen is None or seen.phase is not ModelPhase.READY or not seen.digest or seen.size_bytes is None:
            return None
        found.append(ResolvedModel(key, seen.digest, seen.size_bytes))
    return tuple(found)


def wanted_claim(request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]) -> str | None:
    """The claim name for the request's current artifacts (None while a model is not deliverable)."""
    resolved = resolved_models(request, models)
    return None if resolved is None else claim_name(request.workload, (item.digest for item in resolved))


def provisioning_failure(events: Iterable[Mapping[str, Any]], *, claim_uid: str) -> str | None:
    """The latest ProvisioningFailed message about the claim with this uid, as the report shows it.

    Events are read by a field selector on the claim's name, which anyone who may create Events in
    the namespace can also write: an Event is believed only when its `involvedObject` is this
    claim's uid (a claim made earlier under the same name, or a forged Event, has another)."""
    latest: tuple[datetime.datetime, str] | None = None
    for event in events:
        involved = event.get("involvedObject") or {}
        if (
            not claim_uid
            or event.get("reason") != PROVISIONING_FAILED_EVENT
            or event.get("type") != "Warning"
            or involved.get("kind") != CLAIM_KIND
            or involved.get("uid") != claim_uid
        ):
            continue
        when = _event_time(event)
        if latest is None or when >= latest[0]:
            latest = (when, str(event.get("message") or ""))
    return provisioner_text(latest[1]) or None if latest is not None else None


def _event_time(event: Mapping[str, Any]) -> datetime.datetime:
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        when = parse_timestamp(value)
        if when is not None:
            return when
    return datetime.datetime.min.replace(tzinfo=datetime.UTC)


# ----- decision ------------------------------------------------------------------------------------


def decide(seen: DeliveryObservation, *, policy: Policy, now: datetime.datetime) -> DeliveryAction | None:
    """The next step for one workload; None when there is nothing to do for it at all.

    For the controller: the workload is as stored (with its uid, which a claim's owner needs);
    the admission webhook, which sees objects before they have one, calls `admit`."""
    if ignored(seen.workload.namespace):
        return None
    request = seen.request
    if request is None:
        stripped = strip(seen.template)
        leftovers = stripped != dict(seen.template)
        if not leftovers and not any(name in seen.annotations for name in REPORT_ANNOTATIONS):
            return None
        return DeliveryAction(ANNOTATIONS_REMOVED, None, stripped if leftovers else None, ungate_pods=True)
    if isinstance(request, InvalidSpec):
        return _report(seen, "invalid_spec", DeliveryReason.INVALID_SPEC, request.message)
    if seen.mode is DeliveryMode.NODE_CACHE:
        return _node_cache(seen, request)
    disabled = node_cache_needed(seen.template)
    if disabled is not None:
        return _report(
            seen, "node_cache_delivery_disabled", DeliveryReason.NODE_CACHE_DELIVERY_DISABLED, disabled
        )
    resolved = resolved_models(request, seen.models)
    if resolved is None:
        return _report(
            seen, "model_not_ready", DeliveryReason.MODEL_NOT_READY, _not_ready(request, seen.models)
        )
    name = claim_name(request.workload, (item.digest for item in resolved))
    claim = seen.claim
    if claim is not None and claim.name != name:
        raise ValueError(f"observed claim {claim.name} is not the claim {name} of the current model set")
    if claim is None:
        return _no_claim(seen, request, resolved, name)
    return _claim(seen, resolved, claim, policy=policy, now=now)


def node_cache_needed(template: Mapping[str, Any]) -> str | None:
    """In SharedPVC mode: why the user's own pod template can only work in NodeCache mode (it has an
    inline volume of the module's CSI driver, which only NodeCache mode installs), None if not."""
    volumes = driver_volumes(strip(template))
    if not volumes:
        return None
    return (
        f"the pod template has its own inline volume {', '.join(sorted(volumes))} of the CSI driver "
        f"{NODE_CACHE_DRIVER}, which exists only when delivery.mode is NodeCache (now SharedPVC); switch "
        "delivery.mode to NodeCache, or remove the volume (the annotations alone deliver the models)"
    )


def placement_conflicts(seen: DeliveryObservation) -> list[str]:
    """The user's nodeSelector entries that contradict NodeCache placement, one problem each."""
    wanted = seen.node_cache.placement
    conflicts = node_selector_conflicts(strip(seen.template), wanted)
    return [
        f"the pod template's nodeSelector sets {key}={value!r}, but NodeCache delivery places the pods on "
        f"nodes with {key}={wanted[key]!r} (delivery.nodeCache.nodeSelector and the node cache's readiness "
        f"label); remove {key} from the template's nodeSelector"
        for key, value in sorted(conflicts.items())
    ]


def _node_cache(seen: DeliveryObservation, request: DeliveryRequest) -> DeliveryAction:
    conflicts = placement_conflicts(seen)
    if conflicts:
        return _report(seen, "node_selector_conflict", DeliveryReason.INVALID_SPEC, "; ".join(conflicts))
    resolved = resolved_models(request, seen.models)
    if resolved is None:
        return _report(
            seen, "model_not_ready", DeliveryReason.MODEL_NOT_READY, _not_ready(request, seen.models)
        )
    problem = capacity_problem(
        [(item.key, item.digest, item.size_bytes) for item in resolved], seen.node_cache
    )
    if problem is not None:
        return _report(
            seen, "insufficient_node_cache_capacity", DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY, problem
        )
    current = dict(seen.template)
    wanted = rewrite_for_node_cache(
        current, models=[item.cached for item in resolved], node_selector=seen.node_cache.placement
    )
    nodes = ",".join(f"{key}={value}" for key, value in sorted(seen.node_cache.placement.items()))
    return _report(
        seen,
        "delivered",
        DeliveryReason.DELIVERED,
        f"{_models(resolved)} delivered from the node cache, read-only under {MODELS_DIR}, on nodes with "
        f"{nodes}; a pod starts once its node has the files",
        # A complete template that keeps the gate is left as it is: its pods are ungated.
        template=None if current in (wanted, gate(wanted)) else wanted,
        ungate_pods=True,
    )


def _report(
    seen: DeliveryObservation,
    rule: str,
    reason: DeliveryReason,
    message: str,
    *,
    requeue: float | None = None,
    **changes: Any,
) -> DeliveryAction:
    return DeliveryAction(rule, DeliveryReport(reason, message), requeue=requeue, **changes)


def _not_ready(request: DeliveryRequest, models: Mapping[ModelKey, ModelSeen]) -> str:
    parts = []
    for model in request.models:
        seen = models.get(model.key)
        what = model.key.describe()
        if seen is None or seen.phase is None:
            parts.append(f"{what} does not exist: create it, or correct the annotation {model.annotation}")
        elif seen.phase is not ModelPhase.READY:
            parts.append(f"{what} is {seen.phase}, not Ready: delivery continues once it is Ready")
        elif not seen.digest or seen.size_bytes is None:
            parts.append(
                f"{what} is Ready but its status.artifact has no digest or sizeBytes: delivery continues "
                "once the controller records them"
            )
    return "; ".join(parts)


def _models(resolved: Sequence[ResolvedModel]) -> str:
    return ", ".join(item.key.describe() for item in resolved)


def _no_claim(
    seen: DeliveryObservation, request: DeliveryRequest, resolved: Sequence[ResolvedModel], name: str
) -> DeliveryAction:
    storage = seen.storage
    if storage.problem is not None or storage.name is None:
        return _report(
            seen,
            "no_storage_class",
            DeliveryReason.SHARED_PVC_STORAGE_CLASS_MISSING,
            f"no StorageClass for the shared claim {name}: {storage.problem or 'none resolved'}",
        )
    if storage.binding_mode != IMMEDIATE:
        return _report(
            seen,
            "wait_for_first_consumer_named_before_any_claim",
            DeliveryReason.SHARED_PVC_STORAGE_CLASS_WAIT_FOR_FIRST_CONSUMER,
            f"StorageClass {storage.name} binds volumes only for a first consumer (volumeBindingMode "
            f"{storage.binding_mode}), and the workload's pods wait for the claim's contents, so no "
            "claim is made; set delivery.sharedPVCStorageClassName to a ReadWriteMany class with "
            "volumeBindingMode Immediate",
        )
    artifacts = [Artifact(item.digest, item.size_bytes) for item in resolved]
    manifest = claim_manifest(workload=request.workload, artifacts=artifacts, storage_class=storage.name)
    return _report(
        seen,
        "create_claim",
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        f"creating the shared claim {name} ({claim_size(artifacts)}, ReadWriteMany, StorageClass "
        f"{storage.name}) for {_models(resolved)}",
        create_claim=manifest,
    )


def _claim(
    seen: DeliveryObservation,
    resolved: Sequence[ResolvedModel],
    claim: ClaimSeen,
    *,
    policy: Policy,
    now: datetime.datetime,
) -> DeliveryAction:
    workload = seen.workload
    of_class = f" (StorageClass {claim.storage_class})" if claim.storage_class else ""
    if not made_by_module(claim.shared):
        return _report(
            seen,
            "foreign_claim_with_the_wanted_name",
            DeliveryReason.INVALID_SPEC,
            f"the PersistentVolumeClaim {workload.namespace}/{claim.name} has the name of this workload's "
            "shared claim but was not created by the module, which leaves it alone; delete or rename it",
        )
    if claim.labels.get(OWNER_UID_LABEL) != workload.uid:
        if claim.deleting:
            return _report(
                seen,
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
        return _report(
            seen,
            "adopt_earlier_incarnations_claim",
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            f"taking over the shared claim {claim.name} of an earlier {workload.kind} {workload.name}",
            claim_patch=patch,
        )
    if claim.deleting:
        return _report(
            seen,
            "claim_going",
            DeliveryReason.SHARED_PVC_CLAIM_PENDING,
            f"the shared claim {claim.name} is being deleted; a new one is made once it is gone",
        )
    if claim.phase is ClaimPhase.LOST or (claim.phase is ClaimPhase.BOUND and not claim.volume_exists):
        volume = f"PersistentVolume {claim.volume_name}" if claim.volume_name else "PersistentVolume"
        return _report(
            seen,
            "volume_lost",
            DeliveryReason.SHARED_PVC_VOLUME_LOST,
            f"the shared claim {claim.name}{of_class} lost its {volume}, and the copied models with it; "
            f"delete the claim (kubectl -n {workload.namespace} delete pvc {claim.name}) and restart the "
            "workload's pods, which hold it until they stop; the module then makes a new one and copies "
            "the models again",
        )
    if claim.phase is not ClaimPhase.BOUND:
        return _pending(seen, claim, of_class, policy=policy, now=now)
    return _bound(seen, resolved, claim, policy=policy, now=now)


def _pending(
    seen: DeliveryObservation, claim: ClaimSeen, of_class: str, *, policy: Policy, now: datetime.datetime
) -> DeliveryAction:
    if seen.provisioning_failure:
        return _report(
            seen,
            "provisioning_failed",
            DeliveryReason.SHARED_PVC_PROVISIONING_FAILED,
            f"the provisioner cannot make a volume for the shared claim {claim.name}{of_class}: "
            f"{seen.provisioning_failure}; fix the StorageClass or its provisioner (shared claims need "
            "ReadWriteMany), the claim binds once it can",
            requeue=EVENTS_RECHECK_SECONDS,
        )
    deadline = claim.created + policy.provisioning_deadline
    if now >= deadline:
        return _report(
            seen,
            "provisioning_timed_out",
            DeliveryReason.SHARED_PVC_PROVISIONING_TIMED_OUT,
            f"the shared claim {claim.name}{of_class} is not bound {_duration(policy.provisioning_deadline)} "
            "after it was made and its provisioner reported nothing; check that the StorageClass's "
            "provisioner runs and makes ReadWriteMany volumes, the claim binds once it can",
            requeue=EVENTS_RECHECK_SECONDS,
        )
    return _report(
        seen,
        "claim_pending",
        DeliveryReason.SHARED_PVC_CLAIM_PENDING,
        f"waiting for the shared claim {claim.name}{of_class} to be bound (reported as timed out at "
        f"{timestamp(deadline)})",
        requeue=min(EVENTS_RECHECK_SECONDS, (deadline - now).total_seconds()),
    )


def _bound(
    seen: DeliveryObservation,
    resolved: Sequence[ResolvedModel],
    claim: ClaimSeen,
    *,
    policy: Policy,
    now: datetime.datetime,
) -> DeliveryAction:
    digests = sorted({item.digest for item in resolved})
    job = seen.materialization
    done = _complete(claim, resolved)
    if done or job.state is JobState.SUCCEEDED:
        current = dict(seen.template)
        wanted = rewrite(current, claim=claim.name, models=[item.delivered for item in resolved])
        patch = (
            None
            if done
            else {"metadata": {"annotations": {MATERIALIZED_DIGESTS_ANNOTATION: ",".join(digests)}}}
        )
        return _report(
            seen,
            "delivered",
            DeliveryReason.DELIVERED,
            f"{_models(resolved)} delivered from the shared claim {claim.name}, read-only under {MODELS_DIR}",
            # A complete template that keeps the gate is left as it is: its pods are ungated.
            template=None if current in (wanted, gate(wanted)) else wanted,
            claim_patch=patch,
            ungate_pods=True,
            remove_finished_job=done and job.state in (JobState.SUCCEEDED, JobState.FAILED),
        )
    copying = f"{_models(resolved)} into the shared claim {claim.name}"
    if job.state is JobState.RUNNING:
        return _report(seen, "materializing", DeliveryReason.SHARED_PVC_MATERIALIZING, f"copying {copying}")
    if job.state is JobState.GOING_AWAY:
        return _report(
            seen,
            "materialization_job_going",
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            f"the previous Job copying {copying} is being removed; a new one starts once it is gone",
            requeue=JOB_GONE_SECONDS,
        )
    if job.state is JobState.FAILED:
        again = (job.finished or now) + policy.materialization_retry
        failure = f"copying {copying} failed: {job.message or 'the Job ended without a message'}"
        if now >= again:
            return _report(
                seen,
                "materialization_retried",
                DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
                f"{failure}; trying again now",
                remove_failed_job=True,
                requeue=JOB_GONE_SECONDS,
            )
        return _report(
            seen,
            "materialization_failed",
            DeliveryReason.SHARED_PVC_MATERIALIZATION_FAILED,
            f"{failure}; the module tries again at {timestamp(again)}, or at once when the Job is deleted",
            requeue=(again - now).total_seconds(),
        )
    if seen.materializations_running >= seen.materializations_limit:
        return _report(
            seen,
            "waiting_for_a_materialization_slot",
            DeliveryReason.SHARED_PVC_MATERIALIZING,
            f"waiting for a materialization slot to copy {copying}: {seen.materializations_running} of "
            f"{seen.materializations_limit} running in the cluster (delivery.maxConcurrentMaterializations)",
            requeue=SLOT_RECHECK_SECONDS,
        )
    return _report(
        seen,
        "start_materialization",
        DeliveryReason.SHARED_PVC_MATERIALIZING,
        f"started copying {copying}",
        start_materialization=StartMaterialization(claim.name, tuple(resolved)),
    )


def _complete(claim: ClaimSeen | None, resolved: Sequence[ResolvedModel]) -> bool:
    """Whether the claim holds every artifact (its record), usable as it is."""
    return (
        claim is not None
        and made_by_module(claim.shared)
        and not claim.deleting
        and claim.phase is ClaimPhase.BOUND
        and claim.volume_exists
        and {item.digest for item in resolved} <= claim.materialized
    )


# ----- admission -----------------------------------------------------------------------------------


def admit(seen: DeliveryObservation) -> Template | None:
    """The pod template a workload is admitted with (CREATE or UPDATE); None leaves it as it is.

    Without the annotations (an UPDATE that removed them) the module's part is stripped. When
    every model is Ready, the template is written complete: without the gate when the wanted
    claim already holds every artifact, else with the gate, which the controller then removes from
    the Pods (never from the template) once the claim is filled, so such a Deployment keeps one
    ReplicaSet. While a model is not Ready or the request is broken, the template is gated; one
    that already mounts a claim (a delivery that is blocked now) is left alone: a blocked delivery
    keeps what its pods use. The claim name does not need the uid the object has not got yet.

    In NodeCache mode there is nothing to wait for before scheduling (kubelet's NodePublishVolume
    waits for the node's cache): when every model is Ready and fits `delivery.nodeCache.size`, the
    template is written complete and ungated; otherwise it is gated (or kept, as above). The Nodes'
    reports are not judged here (D111), even when given: the controller does.
    """
    request = seen.request
    if ignored(seen.workload.namespace):
        return None
    current = dict(seen.template)
    if request is None:  # the annotations were removed: take back what the module added, at once
        stripped = strip(current)
        return None if stripped == current else stripped
    resolved = resolved_models(request, seen.models) if isinstance(request, DeliveryRequest) else None
    blocked = current if applied(current) is not None else gate(current)
    if seen.mode is DeliveryMode.NODE_CACHE:
        if (
            resolved is None
            or placement_conflicts(seen)
            # The setting only: Nodes come and go, and a report's limit is the controller's to judge.
            or capacity_problem(
                [(item.key, item.digest, item.size_bytes) for item in resolved],
                dataclasses.replace(seen.node_cache, nodes=()),
            )
        ):
            wanted = blocked
        else:
            complete = rewrite_for_node_cache(
                current, models=[item.cached for item in resolved], node_selector=seen.node_cache.placement
            )
            # Complete and gated (the controller ungates its pods): left as it is, like SharedPVC's.
            wanted = current if current == gate(complete) else complete
    elif resolved is None or not isinstance(request, DeliveryRequest) or node_cache_needed(current):
        wanted = blocked
    else:
        name = claim_name(request.workload, (item.digest for item in resolved))
        claim = seen.claim if seen.claim is not None and seen.claim.name == name else None
        complete = rewrite(current, claim=name, models=[item.delivered for item in resolved])
        if _complete(claim, resolved):
            # A template written complete and gated at CREATE stays as it is on a later UPDATE
            # (a label or annotation change): dropping the gate now would roll the pods for nothing.
            wanted = current if current == gate(complete) else complete
        elif applied(current) is not None:
            wanted = current  # mounts an earlier claim: kept until the new one is filled
        else:
            wanted = gate(complete)
    return None if wanted == current else wanted


def _duration(value: datetime.timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"
