"""The workload admission gate: an annotated Deployment, StatefulSet, DaemonSet or CronJob is
admitted with the pod template the delivery verdict says (`domain.delivery.verdict.admit`), as one
JSON patch, and with the verdict's warning while its pods wait (`kubectl` prints it).

Every controller replica serves it, so it reads what it needs directly (no informer runs outside
the leader): each named Model or ClusterModel, one GET each with a short timeout, and what the mode
reads besides (`strategy.AdmissionStrategy.facts`: SharedPVC the wanted claim, NodeCache nothing).
A read that fails admits the template gated: the pods wait and the leader's controller finishes
the template, so an API hiccup never refuses a workload and never starts pods without their models.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.models import ModelObjects
from ai_models.controller.delivery.observe import observed
from ai_models.controller.delivery.strategy import AdmissionStrategy, Unreadable
from ai_models.controller.runtime.admission_review import Admission
from ai_models.domain.delivery.contract import DeliveryRequest, WorkloadKind, parse, pod_template
from ai_models.domain.delivery.marking import label_patch
from ai_models.domain.delivery.template import gated, json_patch
from ai_models.domain.delivery.verdict import Admitted, admit, held, needs_models, waiting_warning
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey

log = logging.getLogger(__name__)
# (connect, read) of each read: the API server gives the whole webhook call 5 s.
READ_TIMEOUT: Final = (1.0, 1.5)
OPERATIONS: Final = ("CREATE", "UPDATE")

ReadModel = Callable[[ModelKey], Mapping[str, Any] | None]


class ModelReads:
    """The webhook's read of a Model or ClusterModel, one GET; any failure but 404 is `Unreadable`."""

    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = READ_TIMEOUT) -> None:
        self._models = ModelObjects(api_client, timeout=timeout)

    def __call__(self, key: ModelKey) -> Mapping[str, Any] | None:
        try:
            return self._models.get(key)
        except KubeError as error:
            raise Unreadable.of(key.describe(), error) from error


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class WorkloadAdmission:
    """`Admit` for `WebhookServer`: one AdmissionReview request in, the admission out."""

    def __init__(
        self,
        *,
        read_model: ReadModel,
        strategy: AdmissionStrategy,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self._read_model = read_model
        self._strategy = strategy
        self._clock = clock

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
        answer = self._admitted(workload)
        wanted = answer.template
        current = pod_template(workload)
        # The label the after-delete hook selects follows the template admitted (D158).
        marking = label_patch(meta.get("labels"), wanted if wanted is not None else current)
        if wanted is None:
            return Admission(patch=marking) if marking else Admission()
        template_path = WorkloadKind(str(kind)).template_path
        patch = [*json_patch(current, wanted, prefix="/" + "/".join(template_path)), *marking]
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
        return Admission(patch=patch, warnings=answer.warnings)

    def _admitted(self, workload: dict[str, Any]) -> Admitted:
        request = parse(workload)
        named = request if isinstance(request, DeliveryRequest) else None
        strategy = self._strategy
        namespace = str(workload["metadata"]["namespace"])
        # Without the models, the mode reads nothing (SharedPVC has no claim name yet).
        unread = observed(workload, request=request, models={}, facts=strategy.facts(namespace, named, {}))
        if named is None or not needs_models(unread, strategy.rules):
            return admit(unread, strategy.rules, now=self._clock())
        try:
            models = {key: ModelSeen.of(key, self._read_model(key)) for key in named.keys}
            facts = strategy.facts(namespace, named, models)
        except Unreadable as error:
            log.warning("admission read failed; the template is gated", extra={"error": str(error)})
            template = held(unread.template)
            warning = waiting_warning("the controller could not read what it names just now")
            return Admitted(template, (warning,) if template is not None and gated(template) else ())
        seen = dataclasses.replace(unread, models=models, facts=facts)
        return admit(seen, strategy.rules, now=self._clock())
