"""NodeCache delivery: no claim and no Job; each pod gets one inline CSI volume per model from its
node's cache, and is placed on the nodes that have one (`verdict.ModeRules`). The rules:

- A release that runs no node plugin (no node-driver-registrar image for the cluster's Kubernetes,
  D162) is `NodeCacheDeliveryDisabled`, with the chart's words of why (decided first).
- A user nodeSelector entry that sets a key of the placement (`placement.placement`) to another
  value is `InvalidSpec` (decided before any model is read).
- Models that do not fit one node's cache are `InsufficientNodeCacheCapacity`
  (`placement.capacity_problem`): against `delivery.nodeCache.size` and the Nodes' reports.
- Otherwise the template gets the volumes and the placement, and is `Delivered` at once: pods
  start, and kubelet's NodePublishVolume waits for the node's cache.

Admission does not judge the Nodes' reports (D111): Nodes come and go, and a report's limit is the
controller's to judge (`admission_facts`).
"""

from __future__ import annotations

import dataclasses
import datetime

from ai_models.domain.delivery.contract import DeliveryRequest
from ai_models.domain.delivery.placement import NodeCacheSeen, capacity_problem
from ai_models.domain.delivery.report import DeliveryReport
from ai_models.domain.delivery.template import node_selector_conflicts, rewrite_for_node_cache, strip
from ai_models.domain.delivery.verdict import (
    DeliveryObservation,
    Verdict,
    conclude,
    problem_warning,
    unless_kept,
    waiting_warning,
)
from ai_models.domain.delivery.workload_models import ResolvedModel, described
from ai_models.names import MODELS_DIR, DeliveryReason

Seen = DeliveryObservation[NodeCacheSeen]


@dataclasses.dataclass(frozen=True)
class NodeCache:
    """The NodeCache rules; the settings and the Nodes come with each observation's facts."""

    def admission_facts(self, facts: NodeCacheSeen) -> NodeCacheSeen:
        return dataclasses.replace(facts, nodes=())

    def before_models(self, seen: Seen, request: DeliveryRequest) -> Verdict | None:
        unavailable = seen.facts.unavailable
        if unavailable:
            return conclude(
                seen,
                "node_plugin_not_deployed",
                DeliveryReport(DeliveryReason.NODE_CACHE_DELIVERY_DISABLED, unavailable),
                warning=problem_warning(unavailable),
            )
        conflicts = placement_conflicts(seen)
        if not conflicts:
            return None
        message = "; ".join(conflicts)
        return conclude(
            seen,
            "node_selector_conflict",
            DeliveryReport(DeliveryReason.INVALID_SPEC, message),
            warning=problem_warning(message),
        )

    def deliver(
        self,
        seen: Seen,
        request: DeliveryRequest,
        resolved: tuple[ResolvedModel, ...],
        *,
        now: datetime.datetime,
    ) -> Verdict:
        problem = capacity_problem(
            [(item.key, item.digest, item.size_bytes) for item in resolved], seen.facts
        )
        if problem is not None:
            return conclude(
                seen,
                "insufficient_node_cache_capacity",
                DeliveryReport(DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY, problem),
                warning=waiting_warning(problem),
            )
        placement = seen.facts.placement
        complete = rewrite_for_node_cache(
            seen.template, models=[item.cached for item in resolved], node_selector=placement
        )
        nodes = ",".join(f"{key}={value}" for key, value in sorted(placement.items()))
        return conclude(
            seen,
            "delivered",
            DeliveryReport(
                DeliveryReason.DELIVERED,
                f"{described(resolved)} delivered from the node cache, read-only under {MODELS_DIR}, on "
                f"nodes with {nodes}; a pod starts once its node has the files",
            ),
            template=unless_kept(seen.template, complete),
            ungate=True,
            # The claims of an earlier SharedPVC delivery are taken back (D100, D111).
            release=True,
            complete=complete,
        )


def placement_conflicts(seen: Seen) -> list[str]:
    """The user's nodeSelector entries that contradict NodeCache placement, one problem each."""
    wanted = seen.facts.placement
    conflicts = node_selector_conflicts(strip(seen.template), wanted)
    return [
        f"the pod template's nodeSelector sets {key}={value!r}, but NodeCache delivery places the pods on "
        f"nodes with {key}={wanted[key]!r} (delivery.nodeCache.nodeSelector and the node cache's readiness "
        f"label); remove {key} from the template's nodeSelector"
        for key, value in sorted(conflicts.items())
    ]
