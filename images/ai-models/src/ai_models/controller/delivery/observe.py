"""Cached objects -> `domain.delivery.verdict.DeliveryObservation`.

`observation` is pure (dicts in, the observation out); `Observer` gathers its inputs on the leader:
the workload from its informer, the named models from `model_of` (the controller's Model caches),
the claims the workload owns from the claims informer, and the mode's facts from the strategy.
The annotations are parsed and the template read once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ai_models.controller.delivery.informers import BY_OWNER_UID, DeliveryInformers
from ai_models.controller.delivery.keys import WorkloadKey
from ai_models.controller.delivery.strategy import DeliveryStrategy, Subject
from ai_models.domain.delivery.contract import DeliveryRequest, InvalidSpec, parse, pod_template, workload_of
from ai_models.domain.delivery.verdict import DeliveryObservation, Facts
from ai_models.domain.delivery.workload_models import ModelSeen
from ai_models.domain.models.reference import ModelKey

ModelOf = Callable[[ModelKey], Mapping[str, Any] | None]


def observed(
    workload: Mapping[str, Any],
    *,
    request: DeliveryRequest | InvalidSpec | None,
    models: Mapping[ModelKey, ModelSeen],
    facts: Facts,
    owns_claims: bool = False,
) -> DeliveryObservation[Facts]:
    """The observation of one workload whose request is parsed and whose models are read already."""
    meta = workload.get("metadata") or {}
    return DeliveryObservation(
        workload=workload_of(workload),
        annotations=meta.get("annotations") or {},
        template=pod_template(workload),
        request=request,
        models=models,
        facts=facts,
        owns_claims=owns_claims,
    )


def observation(
    workload: Mapping[str, Any],
    *,
    models: Mapping[ModelKey, Mapping[str, Any] | None],
    facts: Facts,
    owns_claims: bool = False,
) -> DeliveryObservation[Facts]:
    """The observation of one workload from the objects read for it (the models as the API server
    returned them, None: missing) and its mode's facts."""
    return observed(
        workload,
        request=parse(workload),
        models={key: ModelSeen.of(key, obj) for key, obj in models.items()},
        facts=facts,
        owns_claims=owns_claims,
    )


class Observer:
    def __init__(
        self, *, informers: DeliveryInformers, model_of: ModelOf, strategy: DeliveryStrategy
    ) -> None:
        self._informers = informers
        self._model_of = model_of
        self._strategy = strategy

    def observe(self, key: WorkloadKey, obj: dict[str, Any]) -> Subject:
        request = parse(obj)
        wanted = request if isinstance(request, DeliveryRequest) else None
        keys = wanted.keys if wanted is not None else ()
        models = {model: ModelSeen.of(model, self._model_of(model)) for model in keys}
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        owned = tuple(self._informers.claims.by_index(BY_OWNER_UID, uid)) if uid else ()
        seen = observed(
            obj,
            request=request,
            models=models,
            facts=self._strategy.facts(key, wanted, models),
            owns_claims=bool(owned),
        )
        return Subject(key=key, obj=obj, seen=seen, owned_claims=owned)
