"""The workload admission gate: an annotated Deployment, StatefulSet, DaemonSet or CronJob is
admitted with the pod template `domain.delivery.decision.admit` says, as one JSON patch.

Every controller replica serves it, so it reads what it needs directly (no informer runs outside
the leader): each named Model or ClusterModel and, in SharedPVC mode, the wanted claim, one GET
each with a short timeout. A read that fails, or (SharedPVC) an object without a name yet
(`generateName`, so no claim name), admits the template gated: the pods wait and the leader's
controller finishes the template, so an API hiccup never refuses a workload and never starts pods
without their models. In NodeCache mode it reads no claim and no Node: a template for Ready models
that fit `delivery.nodeCache.size` is written complete without the gate, a name or not (D111).
What the gate means for the user is said in an admission warning (`kubectl` prints it).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ai_models.adapters.kube.models import ModelObjects
from ai_models.controller.admission.review import Admission
from ai_models.controller.delivery.observe import model_seen, observation
from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, WorkloadKind, parse, pod_template
from ai_models.domain.delivery.decision import (
    admit,
    node_cache_needed,
    placement_conflicts,
    resolved_models,
    wanted_claim,
)
from ai_models.domain.delivery.placement import NodeCacheSeen, capacity_problem
from ai_models.domain.delivery.template import gated, json_patch
from ai_models.domain.models.reference import ModelKey
from ai_models.domain.storage.prerequisites import DeliveryMode
from ai_models.names import DELIVERY_REASON_ANNOTATION, DELIVERY_SCHEDULING_GATE

log = logging.getLogger(__name__)
# (connect, read) of each read: the API server gives the whole webhook call 5 s.
READ_TIMEOUT: Final = (1.0, 1.5)
OPERATIONS: Final = ("CREATE", "UPDATE")

ReadModel = Callable[[ModelKey], Mapping[str, Any] | None]
ReadClaim = Callable[[str, str], Mapping[str, Any] | None]


class Unreadable(Exception):
    """A read the webhook needed did not answer; the template is gated instead."""


class ClusterReads:
    """The webhook's direct reads, each one GET; any failure but 404 is `Unreadable`."""

    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = READ_TIMEOUT) -> None:
        self._models = ModelObjects(api_client, timeout=timeout)
        self._core = k8s.CoreV1Api(api_client)
        self._timeout = timeout

    def model(self, key: ModelKey) -> Mapping[str, Any] | None:
        try:
            return self._models.get(key)
        except (ApiException, HTTPError, OSError) as error:
            raise Unreadable(f"{key.describe()}: {_cause(error)}") from error

    def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            response = self._core.read_namespaced_persistent_volume_claim(
                name, namespace, _request_timeout=self._timeout
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise Unreadable(f"PersistentVolumeClaim {namespace}/{name}: {_cause(error)}") from error
        except (HTTPError, OSError) as error:
            raise Unreadable(f"PersistentVolumeClaim {namespace}/{name}: {_cause(error)}") from error
        claim: dict[str, Any] = self._core.api_client.sanitize_for_serialization(response)
        return claim


def _cause(error: Exception) -> str:
    if isinstance(error, ApiException):
        return f"the API server answered {error.status}"
    return type(error).__name__


class WorkloadAdmission:
    """`Admit` for `WebhookServer`: one AdmissionReview request in, the admission out.
    `node_cache`: the NodeCache settings in NodeCache mode (its `nodes` are not read), None in
    SharedPVC mode."""

    def __init__(
        self, *, read_model: ReadModel, read_claim: ReadClaim, node_cache: NodeCacheSeen | None = None
    ) -> None:
        self._read_model = read_model
        self._read_claim = read_claim
        self._node_cache = node_cache

    def __call__(self, request: Mapping[str, Any]) -> Admission:
        obj = request.get("object")
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if request.get("operation") not in OPERATIONS or kind not in tuple(WorkloadKind):
            return Admission()  # the configuration's rules send nothing else; answer it harmlessly
        assert isinstance(obj, Mapping)
        workload = copy.deepcopy(dict(obj))
        meta = workload.setdefault("metadata", {})
        # The object of a CREATE may carry no namespace yet: the request's is the one it gets.
        meta["namespace"] = meta.get("namespace") or str(request.get("namespace") or "")
        wanted, warning = self._admitted(workload)
        if wanted is None:
            return Admission()
        template_path = WorkloadKind(str(kind)).template_path
        patch = json_patch(pod_template(workload), wanted, prefix="/" + "/".join(template_path))
        name = meta.get("name") or meta.get("generateName") or ""
        log.info(
            "workload admitted with the delivery template",
            extra={
                "workload": f"{kind} {meta['namespace']}/{name}",
                "operation": request.get("operation"),
                "gated": gated(wanted),
                "operations": len(patch),
            },
        )
        return Admission(patch=patch, warnings=(warning,) if warning and gated(wanted) else ())

    def _admitted(self, workload: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        if self._node_cache is not None:
            return self._admitted_for_node_cache(workload, self._node_cache)
        delivery = parse(workload)
        models: dict[ModelKey, Mapping[str, Any] | None] = {}
        claim: Mapping[str, Any] | None = None
        warning = ""
        disabled = node_cache_needed(pod_template(workload))
        if isinstance(delivery, InvalidSpec):
            warning = f"ai-models: {delivery.message}"
        elif isinstance(delivery, DeliveryRequest) and disabled is not None:
            warning = f"ai-models: {disabled}"  # gated by `admit`, whatever the models are
        elif isinstance(delivery, DeliveryRequest):
            if not workload["metadata"].get("name"):
                # No name yet, so no claim name: the controller finishes the template.
                warning = _waiting("the workload has no name yet (generateName)")
            else:
                try:
                    models = {key: self._read_model(key) for key in delivery.keys}
                    name = wanted_claim(
                        delivery, {key: model_seen(key, found) for key, found in models.items()}
                    )
                    if name is None:
                        warning = _waiting("a model it names is not Ready")
                    else:
                        claim = self._read_claim(str(workload["metadata"]["namespace"]), name)
                except Unreadable as error:
                    log.warning("admission read failed; the template is gated", extra={"error": str(error)})
                    models, claim = {}, None
                    warning = _waiting("the controller could not read what it names just now")
                if not warning:
                    warning = _waiting("its shared volume is being filled")
        seen = observation(workload, models=models, claim=claim)
        wanted = admit(seen)
        return (dict(wanted) if wanted is not None else None), warning

    def _admitted_for_node_cache(
        self, workload: dict[str, Any], node_cache: NodeCacheSeen
    ) -> tuple[dict[str, Any] | None, str]:
        delivery = parse(workload)
        models: dict[ModelKey, Mapping[str, Any] | None] = {}
        warning = ""
        if isinstance(delivery, InvalidSpec):
            warning = f"ai-models: {delivery.message}"
        elif isinstance(delivery, DeliveryRequest):
            try:
                models = {key: self._read_model(key) for key in delivery.keys}
            except Unreadable as error:
                log.warning("admission read failed; the template is gated", extra={"error": str(error)})
                models = {}
                warning = _waiting("the controller could not read what it names just now")
        seen = observation(workload, models=models, mode=DeliveryMode.NODE_CACHE, node_cache=node_cache)
        if isinstance(delivery, DeliveryRequest) and not warning:
            conflicts = placement_conflicts(seen)
            resolved = resolved_models(delivery, seen.models)
            if conflicts:
                warning = "ai-models: " + "; ".join(conflicts)
            elif resolved is None:
                warning = _waiting("a model it names is not Ready")
            else:
                problem = capacity_problem(
                    [(item.key, item.digest, item.size_bytes) for item in resolved], node_cache
                )
                warning = _waiting(problem) if problem else ""
        wanted = admit(seen)
        return (dict(wanted) if wanted is not None else None), warning


def _waiting(why: str) -> str:
    return (
        f"ai-models: the pods wait (scheduling gate {DELIVERY_SCHEDULING_GATE}) because {why}; they start "
        f"once the models are delivered. The annotation {DELIVERY_REASON_ANNOTATION} on the workload says "
        "how delivery is going"
    )
