"""The orphan pass: shared claims the module made whose owning workload is gone (D152).

A claim is owned by its workload, so deleting the workload normally takes the claim with it
(garbage collection). When that does not happen (the collector could not finish, or the claim
outlived its workload some other way), nothing reconciles the claim any more: this pass, on the
leader every `orphan_pass_interval`, finds such claims in the claims informer (no owner among the
cached workloads), confirms each against what its namespace holds now (one list per kind that can
mount it, read from the API server: a cache that lags must not make a claim look orphaned), and
applies the stale rule (`domain.delivery.claims.orphan_change`): mark, then delete at least
`claim_grace` later with a uid precondition; a claim mounted again loses its mark. A claim whose
owner exists is left to its workload's reconcile (D100).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ai_models.adapters.kube.claims import DeliveryObjects
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.informer import Informer
from ai_models.domain.conditions import parse_timestamp, timestamp
from ai_models.domain.delivery.claims import ClaimUser, OrphanChange, SharedClaim, orphan_change, owner_gone
from ai_models.names import SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION

log = logging.getLogger(__name__)


@dataclasses.dataclass
class OrphanPassResult:
    marked: list[str] = dataclasses.field(default_factory=list)  # namespace/name
    unmarked: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    failed_namespaces: list[str] = dataclasses.field(default_factory=list)


class OrphanedClaims:
    def __init__(
        self,
        *,
        objects: DeliveryObjects,
        claims: Informer,
        workloads: Iterable[Informer],
        grace: datetime.timedelta,
        interval: datetime.timedelta,
        clock: Callable[[], datetime.datetime],
    ) -> None:
        self._objects = objects
        self._claims = claims
        self._workloads = list(workloads)
        self._grace = grace
        self._interval = interval
        self._clock = clock

    def loop(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval.total_seconds()):
            try:
                self.run()
            except Exception:  # a pass that crashed is tried again at the next interval
                log.exception("the orphaned shared claims pass crashed")

    def run(self) -> OrphanPassResult:
        """One pass; a namespace whose objects cannot all be listed is left for the next pass."""
        result = OrphanPassResult()
        live = {
            str(obj["metadata"].get("uid") or "")
            for informer in self._workloads
            for obj in informer.objects()
        }
        by_namespace: dict[str, list[tuple[SharedClaim, Mapping[str, Any]]]] = {}
        for cached in self._claims.objects():
            claim = SharedClaim.of(cached)
            if owner_gone(claim, live):
                by_namespace.setdefault(claim.namespace, []).append((claim, cached))
        for namespace, candidates in sorted(by_namespace.items()):
            try:
                users = [ClaimUser.of(item) for item in self._objects.mounting_objects(namespace)]
                for claim, obj in candidates:
                    self._judge(claim, obj, users, result)
            except KubeError as error:
                log.warning(
                    "cannot look at the orphaned shared claims of namespace %s (HTTP %s); the next pass "
                    "tries again",
                    namespace,
                    error.status,
                )
                result.failed_namespaces.append(namespace)
        return result

    def _judge(
        self, claim: SharedClaim, obj: Mapping[str, Any], users: list[ClaimUser], result: OrphanPassResult
    ) -> None:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        written = annotations.get(SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION)
        now = self._clock()
        step = orphan_change(
            claim,
            users,
            marked=parse_timestamp(written),
            mark_present=written is not None,
            now=now,
            grace=self._grace,
        )
        where = f"{claim.namespace}/{claim.name}"
        if step.change is OrphanChange.DELETE:
            if self._objects.delete_claim(claim.namespace, claim.name, uid=claim.uid):
                log.info(
                    "deleted the shared claim %s: its workload is gone and nothing has mounted it since %s",
                    where,
                    written,
                )
                result.deleted.append(where)
        elif step.change is OrphanChange.MARK and step.verdict.since is not None:
            self._mark(claim, timestamp(step.verdict.since))
            log.info(
                "the shared claim %s has lost its workload and nothing mounts it; deleted after %ss "
                "unless used again",
                where,
                int(self._grace.total_seconds()),
            )
            result.marked.append(where)
        elif step.change is OrphanChange.UNMARK:
            self._mark(claim, None)
            log.info("the shared claim %s is mounted again; no longer marked for deletion", where)
            result.unmarked.append(where)

    def _mark(self, claim: SharedClaim, since: str | None) -> None:
        self._objects.patch_claim(
            claim.namespace,
            claim.name,
            {"metadata": {"annotations": {SHARED_PVC_UNREFERENCED_SINCE_ANNOTATION: since}}},
        )
