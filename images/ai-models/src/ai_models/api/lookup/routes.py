"""The internal lookup operation and its contract, served only by the internal TLS listener."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ai_models.api.auth import object_access
from ai_models.api.contract import Contract, contract_json
from ai_models.api.models_lookup import LOOKUP_CONTRACT_PATH, LOOKUP_PATH, LookupQuery
from ai_models.api.problems import invalid_parameter
from ai_models.api.state import ApiState, api_state
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind

router = APIRouter()
JSON = "application/json"
State = Annotated[ApiState, Depends(api_state)]


def _ref(query: LookupQuery) -> ModelKey:
    if query.kind is ModelKind.MODEL and query.namespace is None:
        raise invalid_parameter(
            "query parameter namespace: a Model is namespaced; pass namespace=<its namespace>"
        )
    if query.kind is ModelKind.CLUSTER_MODEL and query.namespace is not None:
        raise invalid_parameter(
            "query parameter namespace: a ClusterModel is cluster-scoped; leave namespace out"
        )
    return ModelKey(kind=query.kind, namespace=query.namespace or "", name=query.name)


@router.get(LOOKUP_PATH)
def lookup_model(query: Annotated[LookupQuery, Query()], request: Request, state: State) -> Response:
    ref = _ref(query)
    access = object_access(ref.kind, namespace=ref.namespace or None, name=ref.name)
    state.gatekeeper.admit(request.headers.get("authorization"), access=access)
    answer = state.lookup.find(ref)
    return Response(answer.model_dump_json(by_alias=True, exclude_none=True), media_type=JSON)


@router.get(LOOKUP_CONTRACT_PATH)
def get_lookup_contract() -> Response:
    return Response(contract_json(Contract.INTERNAL_LOOKUP), media_type=JSON)
