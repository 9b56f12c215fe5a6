"""Shared claims of SharedPVC delivery: one ReadWriteMany claim per workload and model set.

A claim is named `ai-models-<workload name, shortened>-<hash>`, the hash over the workload's kind,
namespace and name and the sorted artifact digests: a new model set (or a re-published model) gets
a new claim, the same set the same one. The name does not depend on the workload's UID, because an
admission webhook sees a new object before the API server gives it one (D84). The UID is carried
by the owner-UID label and the ownerReference, written when the controller creates the claim.

Size: the artifacts' bytes (each digest once) plus 10 % plus 1 GiB, rounded up to whole GiB: the
headroom covers filesystem overhead and the completion records. The class comes from the one
resolution chain of docs/internal/ARCHITECTURE.md §7 (`domain.storage.prerequisites.resolve_storage_class`).

Stale claims: a claim may be deleted only if the module made it (the shared-claim and module labels,
and an owner-UID label that equals the uid of one of its ownerReferences), nothing references it
any more (what the claim owns itself, its materialize Job and that Job's Pods, is no reference),
and it has been seen unreferenced for at least the grace period: first seen
unreferenced at one observation, deleted at a later one, never at a single observation.

Which pass applies the stale rule: the delivery controller, in two places (D152). A claim whose
owning workload exists is its reconcile's (`domain.delivery.superseded`, D100); a claim whose
owner is gone (GC could not finish, or the workload was deleted while the claim outlived it) is the
periodic orphan pass's (`orphan_change`).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ai_models.domain.delivery.contract import Workload, WorkloadKind
from ai_models.domain.storage.prerequisites import (
    PrerequisitesReason,
    StorageInputs,
    resolve_storage_class,
)
from ai_models.names import (
    COMPONENT_LABEL,
    DELIVERY_COMPONENT,
    MODULE,
    MODULE_LABEL,
    MODULE_OBJECT_LABELS,
    OWNER_KIND_LABEL,
    OWNER_UID_LABEL,
    SHARED_CLAIM_PREFIX,
    SHARED_PVC_LABEL,
    SHARED_PVC_LABEL_VALUE,
)

READ_WRITE_MANY: Final = "ReadWriteMany"
GIB: Final = 1024**3
HEADROOM_PERCENT: Final = 10
HEADROOM_BYTES: Final = GIB
# A claim name is a DNS-1123 label here (63 characters), so it also fits a label value.
NAME_MAX: Final = 63
_HASH_CHARACTERS: Final = 10
_NOT_LABEL: Final = re.compile(r"[^a-z0-9-]+")


@dataclasses.dataclass(frozen=True, order=True)
class Artifact:
    """A model's published artifact as the claim needs it."""

    digest: str
    size_bytes: int


def claim_name(workload: Workload, digests: Iterable[str]) -> str:
    key = "\n".join([workload.kind, workload.namespace, workload.name, *sorted(set(digests))])
    digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_CHARACTERS]
    room = NAME_MAX - len(SHARED_CLAIM_PREFIX) - 1 - _HASH_CHARACTERS
    head = _NOT_LABEL.sub("-", workload.name.lower())[:room].strip("-")
    return f"{SHARED_CLAIM_PREFIX}{head}-{digest}" if head else f"{SHARED_CLAIM_PREFIX}{digest}"


def claim_size_bytes(artifacts: Iterable[Artifact]) -> int:
    total = sum({item.digest: item.size_bytes for item in artifacts}.values())
    wanted = total + -(-total * HEADROOM_PERCENT // 100) + HEADROOM_BYTES
    return -(-wanted // GIB) * GIB


def claim_size(artifacts: Iterable[Artifact]) -> str:
    """The claim's `resources.requests.storage` as a quantity in GiB."""
    return f"{claim_size_bytes(artifacts) // GIB}Gi"


def claim_labels(workload: Workload) -> dict[str, str]:
    return {
        SHARED_PVC_LABEL: SHARED_PVC_LABEL_VALUE,
        OWNER_UID_LABEL: workload.uid,
        OWNER_KIND_LABEL: workload.kind,
        **MODULE_OBJECT_LABELS,
        COMPONENT_LABEL: DELIVERY_COMPONENT,
    }


def owner_reference(workload: Workload) -> dict[str, Any]:
    # blockOwnerDeletion stays off: setting it needs the right to update the workload's
    # finalizers, and the claim's own pvc-protection finalizer already keeps it while mounted.
    return {
        "apiVersion": workload.kind.api_version,
        "kind": str(workload.kind),
        "name": workload.name,
        "uid": workload.uid,
        "controller": True,
        "blockOwnerDeletion": False,
    }


def claim_manifest(
    *, workload: Workload, artifacts: Sequence[Artifact], storage_class: str
) -> dict[str, Any]:
    """The claim the controller creates for `workload` (which must have its uid by then)."""
    if not workload.uid:
        raise ValueError(f"{workload.describe()} has no uid yet; a claim is made only for a stored workload")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim_name(workload, (item.digest for item in artifacts)),
            "namespace": workload.namespace,
            "labels": claim_labels(workload),
            "ownerReferences": [owner_reference(workload)],
        },
        "spec": {
            "accessModes": [READ_WRITE_MANY],
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": claim_size(artifacts)}},
        },
    }


@dataclasses.dataclass(frozen=True)
class ClassChoice:
    """The class a new shared claim gets, or why there is none (`problem`, with its verdict reason)."""

    name: str | None
    binding_mode: str | None = None
    problem: str | None = None
    reason: PrerequisitesReason | None = None


def claim_storage_class(inputs: StorageInputs) -> ClassChoice:
    resolution = resolve_storage_class(inputs)
    if resolution.failure is not None:
        return ClassChoice(resolution.name, problem=resolution.message, reason=resolution.failure)
    facts = next(item for item in inputs.storage_classes if item.name == resolution.name)
    return ClassChoice(resolution.name, binding_mode=facts.volume_binding_mode)


# ----- stale claims --------------------------------------------------------------------------------


def claims_mounted(obj: Mapping[str, Any]) -> frozenset[str]:
    """The claims a Pod, a Job or a top-level workload's pod template mounts."""
    kind = str(obj.get("kind"))
    node: Any = obj
    if kind in tuple(WorkloadKind) or kind == "Job":
        path = WorkloadKind(kind).template_path if kind in tuple(WorkloadKind) else ("spec", "template")
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        node = node.get("spec") if isinstance(node, Mapping) else None
    else:
        node = obj.get("spec")
    volumes = node.get("volumes") if isinstance(node, Mapping) else None
    return frozenset(
        str(volume["persistentVolumeClaim"]["claimName"])
        for volume in volumes or ()
        if isinstance(volume, Mapping)
        and isinstance(volume.get("persistentVolumeClaim"), Mapping)
        and volume["persistentVolumeClaim"].get("claimName")
    )


def _owner_uids(meta: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(str(ref.get("uid")) for ref in meta.get("ownerReferences") or () if ref.get("uid"))


@dataclasses.dataclass(frozen=True)
class SharedClaim:
    """A claim as the cleanup sees it."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    owner_uids: frozenset[str]  # the uids of its ownerReferences
    deleting: bool = False
    uid: str = ""  # its own uid: what it owns (its materialize Job) does not keep it

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> SharedClaim:
        meta = obj.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            owner_uids=_owner_uids(meta),
            deleting=bool(meta.get("deletionTimestamp")),
            uid=str(meta.get("uid") or ""),
        )


@dataclasses.dataclass(frozen=True)
class ClaimUser:
    """A Pod, a Job or a workload as the cleanup sees it: what it mounts and whom it belongs to."""

    namespace: str
    uid: str
    claims: frozenset[str]  # `claims_mounted`
    owner_uids: frozenset[str] = frozenset()  # the uids of its ownerReferences

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ClaimUser:
        """`obj` must carry its `kind` (list responses leave it out of their items)."""
        meta = obj.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            claims=claims_mounted(obj),
            owner_uids=_owner_uids(meta),
        )


def claim_referenced(claim: SharedClaim, users: Iterable[ClaimUser]) -> bool:
    """Whether anything keeps `claim`: a workload that owns it exists (a claim is made before the
    template that mounts it, and a waiting delivery keeps it), or something of its namespace mounts it
    that the claim does not own itself, directly or through an owner it owns (its materialize Job and
    that Job's Pods mount it, and go with it: counting them would keep an orphaned claim for ever).
    A claim whose uid is unknown owns nothing here, so its Job still counts: unsure means keep."""
    local = [user for user in users if user.namespace == claim.namespace]
    if claim.owner_uids & {user.uid for user in local}:
        return True
    owned: set[str] = {claim.uid} if claim.uid else set()
    grown = bool(owned)
    while grown:
        more = {user.uid for user in local if user.owner_uids & owned and user.uid not in owned}
        owned |= more
        grown = bool(more)
    return any(claim.name in user.claims and user.uid not in owned for user in local)


def made_by_module(claim: SharedClaim) -> bool:
    owner = claim.labels.get(OWNER_UID_LABEL)
    return (
        claim.labels.get(SHARED_PVC_LABEL) == SHARED_PVC_LABEL_VALUE
        and claim.labels.get(MODULE_LABEL) == MODULE
        and bool(owner)
        and owner in claim.owner_uids
    )


class Staleness(enum.StrEnum):
    FOREIGN = "Foreign"  # not made by the module: never touched
    DELETING = "Deleting"
    IN_USE = "InUse"
    UNREFERENCED = "Unreferenced"  # remember `since`; deleted once the grace period has passed
    STALE = "Stale"  # delete it


@dataclasses.dataclass(frozen=True)
class ClaimVerdict:
    staleness: Staleness
    since: datetime.datetime | None = None  # first seen unreferenced (to keep until the next look)
    recheck_at: datetime.datetime | None = None

    @property
    def delete(self) -> bool:
        return self.staleness is Staleness.STALE


def claim_verdict(
    claim: SharedClaim,
    *,
    referenced: bool,
    first_unreferenced: datetime.datetime | None,
    now: datetime.datetime,
    grace: datetime.timedelta,
) -> ClaimVerdict:
    """Whether to delete a shared claim.

    `referenced`: `claim_referenced` (a Pod, a Job or a workload's pod template of the claim's
    namespace mounts it, other than what the claim owns, or its owning workload exists: a claim is
    made before the template that mounts it, and a delivery that waits keeps the claim it will
    mount). `first_unreferenced`: when an earlier
    observation first found it unreferenced (None: never, or referenced since).
    """
    if grace <= datetime.timedelta(0):
        raise ValueError(f"the grace period must be positive, not {grace}")
    if not made_by_module(claim):
        return ClaimVerdict(Staleness.FOREIGN)
    if claim.deleting:
        return ClaimVerdict(Staleness.DELETING)
    if referenced:
        return ClaimVerdict(Staleness.IN_USE)
    if first_unreferenced is None or first_unreferenced >= now:
        return ClaimVerdict(Staleness.UNREFERENCED, since=now, recheck_at=now + grace)
    if now - first_unreferenced < grace:
        return ClaimVerdict(
            Staleness.UNREFERENCED, since=first_unreferenced, recheck_at=first_unreferenced + grace
        )
    return ClaimVerdict(Staleness.STALE, since=first_unreferenced)


# ----- orphaned claims --------------------------------------------------------------------------------


def owner_gone(claim: SharedClaim, live_uids: Iterable[str]) -> bool:
    """A claim the module made, not being deleted, none of whose owners is among `live_uids`: a
    candidate for the orphan pass (which confirms it against what it lists before acting)."""
    return made_by_module(claim) and not claim.deleting and not claim.owner_uids & set(live_uids)


class OrphanChange(enum.StrEnum):
    DELETE = "Delete"
    MARK = "Mark"  # write `since`
    UNMARK = "Unmark"  # remove the mark: something mounts the claim again


@dataclasses.dataclass(frozen=True)
class OrphanStep:
    change: OrphanChange | None  # None: nothing to write
    verdict: ClaimVerdict


def orphan_change(
    claim: SharedClaim,
    users: Sequence[ClaimUser],
    *,
    marked: datetime.datetime | None,
    mark_present: bool,
    now: datetime.datetime,
    grace: datetime.timedelta,
) -> OrphanStep:
    """What the orphan pass writes for `claim` given what its namespace holds now (`users`: its Pods,
    Jobs and workloads) and its mark (`marked`, the parsed `unreferenced-since`; `mark_present`: the
    annotation is there, readable or not). A claim whose owner turns out to exist is left alone,
    mark included: while its workload exists, the mark is that workload's reconcile's (D100)."""
    verdict = claim_verdict(
        claim, referenced=claim_referenced(claim, users), first_unreferenced=marked, now=now, grace=grace
    )
    if verdict.staleness is Staleness.STALE:
        return OrphanStep(OrphanChange.DELETE, verdict)
    if verdict.staleness is Staleness.UNREFERENCED and (marked is None or marked >= now):
        return OrphanStep(OrphanChange.MARK, verdict)
    owner_exists = bool(claim.owner_uids & {user.uid for user in users if user.namespace == claim.namespace})
    if verdict.staleness is Staleness.IN_USE and mark_present and not owner_exists:
        return OrphanStep(OrphanChange.UNMARK, verdict)
    return OrphanStep(None, verdict)
