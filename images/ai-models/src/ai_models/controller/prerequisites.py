"""The storage-prerequisites verdict of a controller replica: read the cluster, run the one pure
evaluator, log it at start (before leader election) and export it on every scrape."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, Final

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ai_models.adapters.kube.events import listed_events
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import NODES, PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES
from ai_models.controller.settings import ControllerSettings
from ai_models.domain.delivery.claim_facts import PROVISIONING_FAILED_EVENT
from ai_models.domain.delivery.mode import DeliveryMode
from ai_models.domain.delivery.read_write_many import claim_facts, needs_events
from ai_models.domain.storage.prerequisites import (
    PrerequisitesVerdict,
    SharedClaimFacts,
    StorageClassFacts,
    StorageInputs,
    evaluate,
)
from ai_models.names import SHARED_PVC_LABEL, SHARED_PVC_LABEL_VALUE, STORAGE_PREREQUISITES_METRIC

log = logging.getLogger(__name__)
SHARED_PVC_SELECTOR = f"{SHARED_PVC_LABEL}={SHARED_PVC_LABEL_VALUE}"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
METRIC = STORAGE_PREREQUISITES_METRIC
# Each read has the object client's timeout: a stalled API server fails the check (logged at start,
# no sample on a scrape) instead of blocking the start or the scrape forever.
# One page of a Pending claim's ProvisioningFailed Events: a retrying provisioner aggregates into
# one Event per message, so the latest refusal is in it.
EVENTS_LIMIT: Final = 50


def storage_classes(api: Any) -> tuple[StorageClassFacts, ...]:
    return tuple(_storage_class(item) for item in Objects(api, STORAGE_CLASSES).list_all())


def _storage_class(item: Mapping[str, Any]) -> StorageClassFacts:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    return StorageClassFacts(
        name=str(item["metadata"]["name"]),
        volume_binding_mode=str(item.get("volumeBindingMode") or "Immediate"),
        is_default=any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS),
    )


def _claim_events(api: Any, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    # One page, filtered by the server to this claim's uid and the reason; `claim_facts` still
    # checks the uid of each, and believes only the latest.
    meta = claim["metadata"]
    return listed_events(
        api,
        meta["namespace"],
        field_selector=f"involvedObject.uid={meta['uid']},reason={PROVISIONING_FAILED_EVENT}",
        limit=EVENTS_LIMIT,
    )


def _shared_claims(api: Any) -> tuple[SharedClaimFacts, ...]:
    """The shared claims the module made, with the access-mode refusal of each Pending one."""
    claims = Objects(api, PERSISTENT_VOLUME_CLAIMS).list_all(label_selector=SHARED_PVC_SELECTOR)
    facts = (claim_facts(claim, _claim_events(api, claim) if needs_events(claim) else ()) for claim in claims)
    return tuple(fact for fact in facts if fact is not None)


def _node_labels(api: Any) -> tuple[dict[str, str], ...]:
    return tuple(
        dict((node.get("metadata") or {}).get("labels") or {}) for node in Objects(api, NODES).list_all()
    )


def read_inputs(api: Any, settings: ControllerSettings) -> StorageInputs:
    mode = settings.delivery_mode
    shared = mode is DeliveryMode.SHARED_PVC
    unavailable = None if shared else settings.delivery_node_cache_unavailable
    return StorageInputs(
        mode=mode,
        shared_pvc_storage_class=settings.delivery_shared_pvc_storage_class,
        global_storage_class=settings.delivery_global_storage_class,
        storage_classes=storage_classes(api) if shared else (),
        shared_claims=_shared_claims(api) if shared else (),
        node_cache_size=settings.delivery_node_cache_size,
        node_cache_selector=settings.delivery_node_cache_selector,
        # Without the node plugin no Node's labels change the verdict (D162).
        node_labels=() if shared or unavailable else _node_labels(api),
        node_cache_unavailable=unavailable,
    )


def check(api: Any, settings: ControllerSettings) -> PrerequisitesVerdict:
    return evaluate(read_inputs(api, settings))


def log_verdict(verdict: PrerequisitesVerdict) -> None:
    facts = {
        "mode": str(verdict.mode),
        "reason": str(verdict.reason),
        "satisfied": verdict.satisfied,
        "storage_class": verdict.storage_class,
    }
    if verdict.satisfied:
        log.info("storage prerequisites: %s", verdict.message, extra=facts)
    else:
        log.warning(
            "storage prerequisites NOT satisfied, delivery cannot work (catalog and APIs keep working): %s",
            verdict.message,
            extra=facts,
        )


class PrerequisitesCollector(Collector):
    """Evaluates on every scrape, so fixing the cluster clears the signal without a restart."""

    def __init__(self, *, api: Any, settings: ControllerSettings) -> None:
        self._api = api
        self._settings = settings

    def describe(self) -> list[Any]:
        # No up-front collect() at registration: that would read the cluster once for nothing.
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            METRIC,
            "1 when the storage prerequisites of the delivery mode are satisfied.",
            labels=["mode", "reason"],
        )
        try:
            verdict = check(self._api, self._settings)
        except Exception as error:
            # Without an answer there is no verdict to report; the scrape itself still succeeds.
            log.warning("storage-prerequisites check failed", extra={"error": str(error)})
            yield family
            return
        family.add_metric([str(verdict.mode), str(verdict.reason)], 1.0 if verdict.satisfied else 0.0)
        yield family
