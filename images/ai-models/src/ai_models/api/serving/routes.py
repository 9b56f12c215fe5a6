"""The serving operations: manifest and files of Models and ClusterModels, GET and HEAD.

Served on both listeners: the public one (users, the public route) and the internal TLS one (the
node plugin and materializers, D159), where a Kubernetes token must be issued for the module
audience (`ApiState.serving_gatekeeper`); a delivery token is checked the same way on both.

Each request is checked in this order: its parameters (400), the caller (401, then 403 unless it
may `get` the object, or its delivery token lists it), the object (404, 409 unless Ready; 403 when
a delivery token grants another digest than the object's), the file (404 unless the manifest lists
it), the conditions (304, 416).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ValidationError

from ai_models.api.auth import Access, bearer_token, object_access
from ai_models.api.models_serving import (
    CLUSTER_MODEL_FILE_PATH,
    CLUSTER_MODEL_MANIFEST_PATH,
    CLUSTER_MODELS_PATH,
    MODEL_FILE_PATH,
    MODEL_MANIFEST_PATH,
    ClusterModelFileLocator,
    ClusterModelListQuery,
    ClusterModelManifestLocator,
    ModelFileLocator,
    ModelManifestLocator,
)
from ai_models.api.problems import forbidden, invalid_parameter
from ai_models.api.serving.serving import ServingRequest, subject_key
from ai_models.api.state import ApiState, api_state
from ai_models.domain.delivery.token import is_delivery_token
from ai_models.domain.models.reference import ModelKey
from ai_models.names import ModelKind

router = APIRouter()
State = Annotated[ApiState, Depends(api_state)]
L = TypeVar("L", bound=BaseModel)
MAX_HEADER = 1024
METHODS = ["GET", "HEAD"]
JSON = "application/json"
# The listing names every Ready ClusterModel, so it takes `list`, as `d8 k get clustermodels` does.
LIST_CLUSTER_MODELS = Access(
    verb="list",
    resource=ModelKind.CLUSTER_MODEL.plural.value,
    fix="ask a cluster administrator for the ai-models User access level without a namespace limit "
    "(or a ClusterRole with list on clustermodels.ai.deckhouse.io)",
)


def _conditions(
    request: Request,
    range_: Annotated[str | None, Header(alias="Range", max_length=MAX_HEADER)] = None,
    if_range: Annotated[str | None, Header(alias="If-Range", max_length=MAX_HEADER)] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match", max_length=MAX_HEADER)] = None,
) -> ServingRequest:
    return ServingRequest(method=request.method, range=range_, if_range=if_range, if_none_match=if_none_match)


def _manifest_conditions(
    request: Request,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match", max_length=MAX_HEADER)] = None,
) -> ServingRequest:
    return ServingRequest(method=request.method, if_none_match=if_none_match)


FileConditions = Annotated[ServingRequest, Depends(_conditions)]
ManifestConditions = Annotated[ServingRequest, Depends(_manifest_conditions)]


def _locate(model: type[L], **values: str) -> L:
    try:
        return model(**values)
    except ValidationError as error:
        problems = "; ".join(f"path parameter {e['loc'][0]}: {e['msg']}" for e in error.errors())
        raise invalid_parameter(problems) from error


def _admitted(state: ApiState, request: Request, ref: ModelKey, conditions: ServingRequest) -> ServingRequest:
    """The request as admitted: by a delivery token (never sent to a TokenReview) or by a
    Kubernetes token allowed to `get` the object; whom its download counts against."""
    authorization = request.headers.get("authorization")
    if is_delivery_token(bearer_token(authorization)):
        admitted = state.delivery.admit(bearer_token(authorization), ref)
        return dataclasses.replace(
            conditions,
            subject=admitted.subject,
            granted_digest=admitted.digest,
            granted_to=admitted.grant.workload.describe(),
        )
    access = object_access(ref.kind, namespace=ref.namespace or None, name=ref.name)
    subject = state.serving_gatekeeper.admit(authorization, access=access)
    return dataclasses.replace(conditions, subject=subject_key(subject))


# Sync on purpose: FastAPI runs these in the thread pool, where reviews and store reads belong.


@router.api_route(MODEL_MANIFEST_PATH, methods=METHODS)
def model_manifest(
    namespace: str, name: str, request: Request, state: State, conditions: ManifestConditions
) -> Response:
    where = _locate(ModelManifestLocator, namespace=namespace, name=name)
    ref = ModelKey(kind=ModelKind.MODEL, namespace=where.namespace, name=where.name)
    return state.serving.manifest_response(ref, _admitted(state, request, ref, conditions))


@router.api_route(MODEL_FILE_PATH.replace("{path}", "{path:path}"), methods=METHODS)
def model_file(
    *, namespace: str, name: str, path: str, request: Request, state: State, conditions: FileConditions
) -> Response:
    where = _locate(ModelFileLocator, namespace=namespace, name=name, path=path)
    ref = ModelKey(kind=ModelKind.MODEL, namespace=where.namespace, name=where.name)
    return state.serving.file_response(ref, where.path, _admitted(state, request, ref, conditions))


@router.api_route(CLUSTER_MODEL_MANIFEST_PATH, methods=METHODS)
def cluster_model_manifest(
    name: str, request: Request, state: State, conditions: ManifestConditions
) -> Response:
    where = _locate(ClusterModelManifestLocator, name=name)
    ref = ModelKey(kind=ModelKind.CLUSTER_MODEL, namespace="", name=where.name)
    return state.serving.manifest_response(ref, _admitted(state, request, ref, conditions))


@router.api_route(CLUSTER_MODEL_FILE_PATH.replace("{path}", "{path:path}"), methods=METHODS)
def cluster_model_file(
    name: str, path: str, request: Request, state: State, conditions: FileConditions
) -> Response:
    where = _locate(ClusterModelFileLocator, name=name, path=path)
    ref = ModelKey(kind=ModelKind.CLUSTER_MODEL, namespace="", name=where.name)
    return state.serving.file_response(ref, where.path, _admitted(state, request, ref, conditions))


@router.get(CLUSTER_MODELS_PATH)
def list_cluster_models(
    query: Annotated[ClusterModelListQuery, Query()], request: Request, state: State
) -> Response:
    authorization = request.headers.get("authorization")
    if is_delivery_token(bearer_token(authorization)):
        # A delivery token grants named artifacts to one workload; it never lists.
        raise forbidden(
            "a delivery token reads the artifacts it names only and cannot list ClusterModels; send a "
            "Kubernetes token allowed to list clustermodels.ai.deckhouse.io"
        )
    state.serving_gatekeeper.admit(authorization, access=LIST_CLUSTER_MODELS)
    page = state.listing.page(query)
    return Response(page.model_dump_json(by_alias=True, exclude_none=True), media_type=JSON)
