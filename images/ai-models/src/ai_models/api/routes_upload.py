"""The upload operation: one streaming PUT per upload URL (see `uploads` for what happens).

No body-size limit and no read timeout apply here: uvicorn has neither, and the app adds no
middleware that reads or bounds bodies. A client silent for `api_upload_idle_timeout_seconds`
is the only one cut off.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ai_models.api.models_upload import UPLOAD_PATH
from ai_models.api.state import ApiState, api_state
from ai_models.api.uploads import disposition_filename

router = APIRouter()
JSON = "application/json"
State = Annotated[ApiState, Depends(api_state)]


# Async on purpose: the body is read on the event loop, so Starlette never buffers it.
@router.put(UPLOAD_PATH, status_code=201)
async def upload_model(
    token: str,
    request: Request,
    state: State,
    filename: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
) -> Response:
    name = filename or disposition_filename(request.headers.get("content-disposition"))
    receipt = await state.uploads.receive(token=token, request=request, filename=name)
    return Response(receipt.model_dump_json(by_alias=True), status_code=201, media_type=JSON)
