"""The catalog-import operations: search, sources, one entry and the storage summary, each behind
the Kubernetes review."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import ValidationError

from ai_models.api.auth import Subject, catalog_access
from ai_models.api.catalog.storage_summary import summarize
from ai_models.api.models import (
    API_PREFIX,
    SEARCH_PATH,
    SOURCES_PATH,
    STORAGE_SUMMARY_PATH,
    EntryLocator,
    SearchQuery,
)
from ai_models.api.problems import invalid_parameter
from ai_models.api.state import ApiState, api_state

router = APIRouter()
JSON = "application/json"


def _admitted(verb: str) -> object:
    def admit(request: Request) -> Subject:
        # Sync on purpose: FastAPI runs it in the thread pool, where the blocking reviews belong.
        return api_state(request).gatekeeper.admit(
            request.headers.get("authorization"), access=catalog_access(verb)
        )

    return Depends(admit)


ListAllowed = Annotated[Subject, _admitted("list")]
GetAllowed = Annotated[Subject, _admitted("get")]
State = Annotated[ApiState, Depends(api_state)]


@router.get(SEARCH_PATH)
def search_models(query: Annotated[SearchQuery, Query()], state: State, _subject: ListAllowed) -> Response:
    if query.source is not None:
        state.catalog.require_source(query.source, index_complete=state.first_index_pass_complete.is_set())
    return Response(state.catalog.search(query), media_type=JSON)


@router.get(SOURCES_PATH)
def list_sources(state: State, _subject: ListAllowed) -> Response:
    body = state.catalog.sources().model_dump_json(by_alias=True, exclude_none=True)
    return Response(body, media_type=JSON)


# `{id:path}`: ids keep their `/` (`org/name`); a percent-encoded `/` arrives decoded the same way.
@router.get(f"{API_PREFIX}/sources/{{source}}/models/{{id:path}}")
def get_model(source: str, id: str, state: State, _subject: GetAllowed) -> Response:
    try:
        locator = EntryLocator(source=source, id=id)
    except ValidationError as error:
        problems = "; ".join(f"path parameter {e['loc'][0]}: {e['msg']}" for e in error.errors())
        raise invalid_parameter(problems) from error
    return Response(state.catalog.entry(locator), media_type=JSON)


@router.get(STORAGE_SUMMARY_PATH)
def get_storage_summary(state: State, _subject: GetAllowed) -> Response:
    ledger = state.ledger
    summary = summarize(ledger.snapshot(), capacity_bytes=ledger.capacity_bytes)
    return Response(summary.model_dump_json(by_alias=True, exclude_none=True), media_type=JSON)
