"""The contract documents and the probes; no token needed (the public routes do not expose the probes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from ai_models.api.contract import Contract, contract_json
from ai_models.api.models import (
    CONTRACT_PATH,
    HEALTH_PATH,
    LEGACY_CONTRACT_PATH,
    READY_PATH,
    Health,
    HealthStatus,
    Readiness,
    ReadinessStatus,
)
from ai_models.api.models_serving import SERVING_CONTRACT_PATH
from ai_models.api.problems import not_ready
from ai_models.api.state import ApiState, api_state
from ai_models.api.upload.models import UPLOAD_CONTRACT_PATH

router = APIRouter()
JSON = "application/json"
State = Annotated[ApiState, Depends(api_state)]


@router.get(CONTRACT_PATH)
@router.get(LEGACY_CONTRACT_PATH)
def get_contract() -> Response:
    return Response(contract_json(Contract.CATALOG_IMPORT), media_type=JSON)


@router.get(UPLOAD_CONTRACT_PATH)
def get_upload_contract() -> Response:
    return Response(contract_json(Contract.UPLOAD), media_type=JSON)


# The serving contract, on both listeners beside the serving routes (the apps include it).
serving_contract = APIRouter()


@serving_contract.get(SERVING_CONTRACT_PATH)
def get_serving_contract() -> Response:
    return Response(contract_json(Contract.SERVING), media_type=JSON)


@router.get(HEALTH_PATH)
def get_health() -> Response:
    return Response(Health(status=HealthStatus.ALIVE).model_dump_json(), media_type=JSON)


@router.get(READY_PATH)
def get_readiness(state: State) -> Response:
    # Ready while the index can be read at all, built or not: a replica with a partial index
    # answers with what it has, and holding readiness back would only turn that into 503s.
    if state.shutting_down.is_set():
        raise not_ready("the replica is shutting down; other replicas take the traffic")
    try:
        sources = len(state.catalog.sources().items)
    except Exception as error:
        raise not_ready(
            f"the local catalog index cannot be read ({error}); the replica restarts clean"
        ) from error
    readiness = Readiness(
        status=ReadinessStatus.READY,
        firstIndexPassComplete=state.first_index_pass_complete.is_set(),
        sources=sources,
    )
    return Response(readiness.model_dump_json(by_alias=True), media_type=JSON)
