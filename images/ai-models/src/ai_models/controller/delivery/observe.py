"""Cached objects -> `domain.delivery.decision.DeliveryObservation`.

`observation` is pure (dicts in, the observation out); `Observer` gathers its inputs: the workload
and its claim, volume and Job from the informers, the named models from `model_of` (the
controller's Model caches), the class a new claim would get from `storage_class` (asked only when
there is no claim yet), the cluster's running materializations from the slot keeper, and the
ProvisioningFailed Events of a Pending claim with one server-side filtered list (one page, the
claim's name and kind), which `decision.provisioning_failure` then believes only for the claim's uid.
In NodeCache mode there is no claim, Job or class to read: the Nodes of the cache come from the
Node informer (`placement.selected_nodes`), with the settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.pages import page_items
from ai_models.controller.delivery.informers import BY_OWNER_UID, DeliveryInformers
from ai_models.controller.delivery.jobs import job_name, materialization_seen
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.models.slots import SlotKeeper
from ai_models.domain.delivery.claims import ClassChoice
from ai_models.domain.delivery.contract import DeliveryRequest, parse, pod_template, workload_of
from ai_models.domain.delivery.decision import (
    CLAIM_KIND,
    ClaimSeen,
    DeliveryObservation,
    JobState,
    MaterializationSeen,
    ModelSeen,
    provisioning_failure,
    wanted_claim,
)
from ai_models.domain.delivery.placement import NodeCacheSeen, selected_nodes
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import ClaimPhase, DeliveryMode

# One page of a claim's Events: a provisioner retrying for hours aggregates into one Event per
# message, so the latest failure is in the first page.
EVENTS_LIMIT: Final = 50
NO_JOB: Final = MaterializationSeen()

ModelOf = Callable[[ModelKey], Mapping[str, Any] | None]


def model_seen(key: ModelKey, obj: Mapping[str, Any] | None) -> ModelSeen:
    """A Model or ClusterModel as the decision reads it (phase None: it does not exist)."""
    return ModelSeen.of(key, obj)


def observation(
    workload: Mapping[str, Any],
    *,
    models: Mapping[ModelKey, Mapping[str, Any] | None],
    claim: Mapping[str, Any] | None = None,
    volume_exists: bool = True,
    events: Sequence[Mapping[str, Any]] = (),
    materialization: MaterializationSeen = NO_JOB,
    storage: ClassChoice | None = None,
    running: int = 0,
    limit: int = 2,
    mode: DeliveryMode = DeliveryMode.SHARED_PVC,
    node_cache: NodeCacheSeen | None = None,
) -> DeliveryObservation:
    """The observation of one workload from the objects read for it; `claim` must be the claim
    named for the current model set (`claim_name`), `events` those listed for that claim."""
    claim_seen = ClaimSeen.of(claim, volume_exists=volume_exists) if claim is not None else None
    failure = (
        provisioning_failure(events, claim_uid=claim_seen.uid)
        if claim_seen is not None and claim_seen.phase is ClaimPhase.PENDING
        else None
    )
    meta = workload.get("metadata") or {}
    return DeliveryObservation(
        workload=workload_of(workload),
        mode=mode,
        node_cache=node_cache or NodeCacheSeen(),
        annotations=meta.get("annotations") or {},
        template=pod_template(workload),
        request=parse(workload),
        models={key: model_seen(key, obj) for key, obj in models.items()},
        storage=storage or ClassChoice(None),
        claim=claim_seen,
        provisioning_failure=failure,
        materialization=materialization,
        materializations_running=running,
        materializations_limit=limit,
    )


def fills(job: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    """Whether the materialize Job was made for this claim (its owner is the claim's uid), not for
    an earlier claim of the same name."""
    uid = (claim.get("metadata") or {}).get("uid")
    owners = (job.get("metadata") or {}).get("ownerReferences") or ()
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("kind") == CLAIM_KIND and ref.get("uid") == uid for ref in owners
    )


@dataclasses.dataclass(frozen=True)
class Subject:
    """One workload as a pass saw it."""

    key: WorkloadKey
    obj: dict[str, Any]
    seen: DeliveryObservation
    claim: Mapping[str, Any] | None = None
    job: Mapping[str, Any] | None = None
    # The shared claims whose ownerReferences name the workload's uid (the claims informer's index).
    owned_claims: tuple[Mapping[str, Any], ...] = ()

    @property
    def log(self) -> dict[str, str]:
        return {"workload": str(self.key)}


class Observer:
    def __init__(
        self,
        *,
        api_client: Any,
        informers: DeliveryInformers,
        model_of: ModelOf,
        storage_class: Callable[[], ClassChoice],
        slots: SlotKeeper,
        termination_message: Callable[[Mapping[str, Any]], str | None],
        timeout: tuple[float, float] = (3, 10),
        node_cache: NodeCacheSeen | None = None,
    ) -> None:
        """`node_cache`: the NodeCache settings (its `nodes` are read from the Node informer at
        each pass); None in SharedPVC mode."""
        self._core = k8s.CoreV1Api(api_client)
        self._informers = informers
        self._model_of = model_of
        self._storage_class = storage_class
        self._slots = slots
        self._termination_message = termination_message
        self._timeout = timeout
        self._node_cache = node_cache

    def observe(self, key: WorkloadKey, obj: dict[str, Any]) -> Subject:
        request = parse(obj)
        models: dict[ModelKey, Mapping[str, Any] | None] = {}
        if isinstance(request, DeliveryRequest):
            models = {model: self._model_of(model) for model in request.keys}
        if self._node_cache is not None:
            return self._subject(
                key,
                obj,
                observation(obj, models=models, mode=DeliveryMode.NODE_CACHE, node_cache=self.node_cache()),
            )
        name = (
            wanted_claim(request, {model: model_seen(model, found) for model, found in models.items()})
            if isinstance(request, DeliveryRequest)
            else None
        )
        claim = self._informers.claims.get(key.namespace, name) if name else None
        jobs = self._informers.jobs
        job = jobs.get(key.namespace, job_name(name)) if name and jobs is not None else None
        uid = str(((job or {}).get("metadata") or {}).get("uid") or "")
        seen = observation(
            obj,
            models=models,
            claim=claim,
            volume_exists=self.volume_exists(claim) if claim is not None else True,
            events=self._events(claim) if claim is not None else (),
            materialization=self._materialization(
                job, claim=claim, removed_here=bool(uid) and self._slots.is_ended(uid)
            ),
            storage=self._storage_class() if name is not None and claim is None else None,
            running=self._slots.running(),
            limit=self._slots.limit,
        )
        return self._subject(key, obj, seen, claim=claim, job=job)

    def node_cache(self) -> NodeCacheSeen:
        """The NodeCache settings with the Nodes they select, as cached now."""
        if self._node_cache is None or self._informers.nodes is None:
            raise ValueError("the NodeCache settings and the Node informer are read in NodeCache mode only")
        nodes = selected_nodes(self._informers.nodes.objects(), self._node_cache.selector)
        return dataclasses.replace(self._node_cache, nodes=nodes)

    def _subject(
        self,
        key: WorkloadKey,
        obj: dict[str, Any],
        seen: DeliveryObservation,
        *,
        claim: Mapping[str, Any] | None = None,
        job: Mapping[str, Any] | None = None,
    ) -> Subject:
        owned = (
            tuple(self._informers.claims.by_index(BY_OWNER_UID, seen.workload.uid))
            if seen.workload.uid
            else ()
        )
        return Subject(key=key, obj=obj, seen=seen, claim=claim, job=job, owned_claims=owned)

    def _materialization(
        self, job: Mapping[str, Any] | None, *, claim: Mapping[str, Any] | None, removed_here: bool
    ) -> MaterializationSeen:
        if job is not None and claim is not None and not fills(job, claim):
            # A Job of an earlier claim of this name, which the garbage collector has not removed
            # yet (or which was orphaned): what it copied is not on this claim, so it counts as
            # going, never as this claim's copy; its successor starts once it is gone.
            return MaterializationSeen(JobState.GOING_AWAY)
        seen = materialization_seen(job, removed_here=removed_here)
        if job is not None and seen.state is JobState.FAILED:
            seen = materialization_seen(job, termination_message=self._termination_message(job))
        return seen

    def volume_exists(self, claim: Mapping[str, Any]) -> bool:
        """Whether a bound claim's PersistentVolume exists: the cache, confirmed by a read when the
        cache lacks it (the volume informer may not have seen a volume the claim's binder made)."""
        phase = (claim.get("status") or {}).get("phase")
        volume = str((claim.get("spec") or {}).get("volumeName") or "")
        if phase != ClaimPhase.BOUND.value or not volume:
            return True
        if self._informers.volumes is not None and self._informers.volumes.get("", volume) is not None:
            return True
        try:
            self._core.read_persistent_volume(
                volume, _request_timeout=self._timeout, _preload_content=False
            ).release_conn()
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def _events(self, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The Events about the claim's name (one page), only while it is Pending."""
        if (claim.get("status") or {}).get("phase") not in (None, ClaimPhase.PENDING.value):
            return []
        meta = claim["metadata"]
        response = self._core.list_namespaced_event(
            meta["namespace"],
            field_selector=f"involvedObject.name={meta['name']},involvedObject.kind={CLAIM_KIND}",
            limit=EVENTS_LIMIT,
            _request_timeout=self._timeout,
            _preload_content=False,
        )
        return page_items(response)
