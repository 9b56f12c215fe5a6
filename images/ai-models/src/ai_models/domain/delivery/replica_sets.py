"""Which ReplicaSets of a delivering Deployment the controller deletes (docs/internal/ARCHITECTURE.md §4).

A Deployment admitted while a model was not Ready carries a template that only the delivery gate
was added to; its ReplicaSet makes Pods that can never start. Once the models are there the
controller writes the complete template, the Deployment controller makes a second ReplicaSet, and
the first would stay in the rollout history with its gated Pods. `stale_replica_sets` names those
the controller deletes, and only:

- ReplicaSets the Deployment controls (a controller ownerReference with the Deployment's uid);
- not the current one (its template, without the `pod-template-hash` label, is the Deployment's);
- whose pod template carries the delivery gate and no delivery record: made only by the gate, so
  never a user's own earlier template, nor one the module wrote complete;
- with no available Pod (a gate someone took off by hand lets a Pod run: it stays while it runs);
- once the current ReplicaSet is available: its status is of its current generation and it has
  every replica available, counted against the larger of its `spec.replicas` and the Deployment's
  `desired-replicas` annotation (a real rollout grows the new ReplicaSet step by step). With 0
  replicas the current ReplicaSet counts as available (0 of 0): no Pod would ever prove more, and
  the stale one has no Pod that ever ran.

A Deployment whose `deployment.kubernetes.io/revision` is 1 (or not yet written) has only ever had
one ReplicaSet: `may_have_stale` says so without a list.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ai_models.domain.delivery.template import applied, gated

# Kubernetes' own names (the Deployment controller writes them), not the module's.
POD_TEMPLATE_HASH_LABEL: Final = "pod-template-hash"
REVISION_ANNOTATION: Final = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS_ANNOTATION: Final = "deployment.kubernetes.io/desired-replicas"


@dataclasses.dataclass(frozen=True, order=True)
class ReplicaSetRef:
    name: str
    uid: str


@dataclasses.dataclass(frozen=True)
class StaleReplicaSets:
    """`delete`: to delete now. `waiting`: made only by the gate, kept for now (the current
    ReplicaSet is not available yet, or they have available Pods). `current`: the current
    ReplicaSet's name, "" while the Deployment controller has not made it."""

    delete: tuple[ReplicaSetRef, ...] = ()
    waiting: tuple[ReplicaSetRef, ...] = ()
    current: str = ""
    current_available: bool = False

    @property
    def settled(self) -> bool:
        """Nothing more becomes deletable until the Deployment's template changes."""
        return self.current_available and not self.waiting


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def revision(obj: Mapping[str, Any]) -> int:
    return _int((_meta(obj).get("annotations") or {}).get(REVISION_ANNOTATION))


def may_have_stale(deployment: Mapping[str, Any]) -> bool:
    """Whether the Deployment has had more than one ReplicaSet (its revision is past 1)."""
    return revision(deployment) > 1


def without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template as the Deployment controller compares it: without the hash label (and
    without labels or metadata that only held it)."""
    copied = copy.deepcopy(dict(template))
    metadata = copied.get("metadata")
    if isinstance(metadata, dict):
        labels = metadata.get("labels")
        if isinstance(labels, dict):
            labels.pop(POD_TEMPLATE_HASH_LABEL, None)
            if not labels:
                del metadata["labels"]
        if not metadata:
            del copied["metadata"]
    return copied


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in _meta(obj).get("ownerReferences") or ()
    )


def _template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    template = (obj.get("spec") or {}).get("template")
    return template if isinstance(template, Mapping) else {}


def available(replica_set: Mapping[str, Any], *, desired: int = 0) -> bool:
    """Whether every replica of the ReplicaSet is available, as of its current generation."""
    status = replica_set.get("status") or {}
    generation = _int(_meta(replica_set).get("generation"))
    if _int(status.get("observedGeneration")) < generation:
        return False
    spec_replicas = (replica_set.get("spec") or {}).get("replicas")
    wanted = max(1 if spec_replicas is None else _int(spec_replicas), desired)
    return _int(status.get("availableReplicas")) >= wanted


def made_only_by_the_gate(template: Mapping[str, Any]) -> bool:
    return gated(template) and applied(template) is None


def stale_replica_sets(
    deployment: Mapping[str, Any], replica_sets: Sequence[Mapping[str, Any]]
) -> StaleReplicaSets:
    """The verdict over the Deployment (as stored: uid, template) and its namespace's ReplicaSets
    matching its selector."""
    uid = str(_meta(deployment).get("uid") or "")
    wanted = without_hash(_template(deployment))
    owned = [rs for rs in replica_sets if controlled_by(rs, uid) and not _meta(rs).get("deletionTimestamp")]
    currents = [rs for rs in owned if without_hash(_template(rs)) == wanted]
    if not currents:
        return StaleReplicaSets()
    current = max(currents, key=revision)
    desired = _int((_meta(current).get("annotations") or {}).get(DESIRED_REPLICAS_ANNOTATION))
    ready = available(current, desired=desired)
    delete: list[ReplicaSetRef] = []
    waiting: list[ReplicaSetRef] = []
    for rs in owned:
        if any(rs is item for item in currents) or not made_only_by_the_gate(_template(rs)):
            continue
        ref = ReplicaSetRef(str(_meta(rs).get("name") or ""), str(_meta(rs).get("uid") or ""))
        has_available = _int((rs.get("status") or {}).get("availableReplicas")) > 0
        (delete if ready and not has_available else waiting).append(ref)
    return StaleReplicaSets(
        delete=tuple(sorted(delete)),
        waiting=tuple(sorted(waiting)),
        current=str(_meta(current).get("name") or ""),
        current_available=ready,
    )
