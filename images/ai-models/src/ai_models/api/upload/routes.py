"""The upload operation: one streaming PUT per upload URL (see `uploads` for what happens).

No body-size limit applies here: the app adds no middleware that reads or bounds bodies. What
bounds an upload in time is its `Pace` (idle timeout, minimum rate over a window, deadline).
Headers the contract bounds are refused with 400 before anything else is looked at.
"""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from ai_models.api.state import ApiState, api_state
from ai_models.api.upload.models import UPLOAD_PATH
from ai_models.api.upload.uploads import disposition_filename

router = APIRouter()
JSON = "application/json"
State = Annotated[ApiState, Depends(api_state)]
# The contract's maxLength of the Content-Disposition header (openapi/upload.yaml).
MAX_CONTENT_DISPOSITION: Final = 1024
MAX_FILENAME: Final = 255


# Async on purpose: the body is read on the event loop, so Starlette never buffers it.
@router.put(UPLOAD_PATH, status_code=201)
async def upload_model(
    token: str,
    request: Request,
    state: State,
    filename: Annotated[str | None, Query(min_length=1, max_length=MAX_FILENAME)] = None,
    content_disposition: Annotated[
        str | None, Header(alias="Content-Disposition", max_length=MAX_CONTENT_DISPOSITION)
    ] = None,
) -> Response:
    name = filename or disposition_filename(content_disposition)
    receipt = await state.uploads.receive(token=token, request=request, filename=name)
    return Response(
        receipt.model_dump_json(by_alias=True, exclude_none=True), status_code=201, media_type=JSON
    )
