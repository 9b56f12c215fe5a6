"""The internal lookup's answer: one Model or ClusterModel as other modules need it.

Read from the object as the module last wrote its status; a part of the status that does not
match the contract (a newer controller wrote a field this api does not know) is left out and
logged rather than failing the lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ai_models.api.model_objects import ApiModels, ModelObject
from ai_models.api.models_lookup import ArtifactView, ConditionView, Delivery, ModelLookup, ResolvedProfile
from ai_models.api.models_serving import CLUSTER_MODEL_MANIFEST_PATH, MODEL_MANIFEST_PATH
from ai_models.api.problems import not_found
from ai_models.domain.models.reference import ModelKey
from ai_models.names import API_SERVICE, MODELS_DIR, ModelKind

log = logging.getLogger(__name__)

# Where workload containers see a delivered model (the workload delivery contract).
# The Service of the api (templates/api/service.yaml), port 80 -> the public listener.
M = TypeVar("M", bound=BaseModel)


def manifest_url(ref: ModelKey, *, module_namespace: str) -> str:
    """The serving API's manifest of `ref` inside the cluster.

    `<service>.<namespace>.svc` resolves through the pod's DNS search list whatever the cluster
    domain is, so none is written here.
    """
    if ref.kind is ModelKind.MODEL:
        path = MODEL_MANIFEST_PATH.format(namespace=ref.namespace, name=ref.name)
    else:
        path = CLUSTER_MODEL_MANIFEST_PATH.format(name=ref.name)
    return f"http://{API_SERVICE}.{module_namespace}.svc{path}"


def _part(model: type[M], value: Any, *, ref: ModelKey, field: str) -> M | None:
    if not isinstance(value, Mapping):
        return None
    try:
        return model.model_validate(value)
    except ValidationError as error:
        log.warning(
            "a status field does not match the lookup contract; left out",
            extra={"object": ref.describe(), "field": field, "error": str(error)},
        )
        return None


def lookup_answer(found: ModelObject, *, module_namespace: str) -> ModelLookup:
    ref = found.ref
    status = found.status
    artifact = status.get("artifact")
    conditions = [
        condition
        for item in status.get("conditions") or []
        if (condition := _part(ConditionView, item, ref=ref, field="conditions")) is not None
    ]
    return ModelLookup(
        kind=ref.kind,
        namespace=ref.namespace if ref.kind is ModelKind.MODEL else None,
        name=ref.name,
        uid=found.uid,
        # The controller has not looked at a new object yet: nothing has happened to it.
        phase=found.phase,
        artifact=_part(ArtifactView, artifact, ref=ref, field="artifact") if found.digest else None,
        resolved=_part(ResolvedProfile, status.get("resolved"), ref=ref, field="resolved"),
        conditions=conditions or None,
        delivery=Delivery(
            path=f"{MODELS_DIR}/{ref.name}", manifestURL=manifest_url(ref, module_namespace=module_namespace)
        ),
    )


class Lookup:
    def __init__(self, *, models: ApiModels, module_namespace: str) -> None:
        self._models = models
        self._namespace = module_namespace

    def find(self, ref: ModelKey) -> ModelLookup:
        found = self._models.get(ref)
        if found is None:
            raise not_found(f"there is no {ref.describe()}; check the kind, name (and namespace)")
        return lookup_answer(found, module_namespace=self._namespace)
