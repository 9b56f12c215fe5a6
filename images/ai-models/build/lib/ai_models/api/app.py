"""The api's FastAPI application: routes, one problem shape for every error, request metrics.

FastAPI's own OpenAPI generation and docs pages are off: the served `/openapi.json` is the
contract file, not something derived from the code.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ai_models.api import routes_catalog, routes_service
from ai_models.api.contract import query_parameters
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import ProblemType
from ai_models.api.problems import PROBLEM_MEDIA_TYPE, ApiProblem, invalid_parameter
from ai_models.api.state import ApiState

log = logging.getLogger(__name__)

UNMATCHED_ROUTE = "unmatched"


def problem_response(problem: ApiProblem) -> Response:
    return Response(
        problem.problem().model_dump_json(),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=problem.headers,
    )


def _parameter_problem(error: RequestValidationError) -> ApiProblem:
    parts = []
    for item in error.errors():
        where = [str(part) for part in item.get("loc", ())]
        place, name = (where[0], ".".join(where[1:])) if len(where) > 1 else ("request", ".".join(where))
        parts.append(f"{place} parameter {name}: {item.get('msg', 'invalid')}")
    return invalid_parameter("; ".join(parts) + "; see /openapi.json for the accepted values")


_HTTP_PROBLEMS = {
    404: (ProblemType.NOT_FOUND, "no such path; the catalog-import API lives under /api/catalog-import/v1"),
    405: (ProblemType.METHOD_NOT_ALLOWED, "this path answers only the methods in the Allow header"),
}


def reject_undeclared_query_parameters(request: Request) -> None:
    """Refuse query parameters the contract does not declare for the operation.

    A misspelt filter must fail loudly rather than silently return the unfiltered catalog.
    """
    route: Any = request.scope.get("route")
    declared = query_parameters().get(getattr(route, "path_format", ""), frozenset())
    unknown = sorted(set(request.query_params.keys()) - declared)
    if unknown:
        accepted = ", ".join(sorted(declared)) or "none"
        raise invalid_parameter(
            f"unknown query parameter(s) {', '.join(map(repr, unknown))}; this operation accepts: {accepted}"
        )


async def _on_problem(_request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiProblem)
    return problem_response(error)


async def _on_validation(_request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    return problem_response(_parameter_problem(error))


async def _on_http(_request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    kind, detail = _HTTP_PROBLEMS.get(error.status_code, (ProblemType.INTERNAL_ERROR, str(error.detail)))
    return problem_response(ApiProblem(kind, error.status_code, detail, headers=dict(error.headers or {})))


async def _on_crash(request: Request, error: Exception) -> Response:
    log.error(
        "request failed unexpectedly",
        exc_info=error,
        extra={"path": request.url.path, "method": request.method},
    )
    return problem_response(
        ApiProblem(
            ProblemType.INTERNAL_ERROR,
            500,
            f"the api failed answering this request ({type(error).__name__}); the replica logged the "
            "details; retry, and report it if it persists",
        )
    )


class RequestMetrics:
    """Counts and times every HTTP request by route template (bounded label values)."""

    def __init__(self, app: ASGIApp, *, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def remember_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, remember_status)
        finally:
            # The router put the matched route into this same scope dict on the way in.
            route: Any = scope.get("route")
            label = getattr(route, "path_format", None) or UNMATCHED_ROUTE
            seconds = time.perf_counter() - started
            method = scope.get("method", "")
            self.metrics.requests.labels(label, method, str(status)).inc()
            self.metrics.request_duration.labels(label, method).observe(seconds)
            log.debug(
                "request answered",
                extra={"route": label, "method": method, "status": status, "seconds": round(seconds, 4)},
            )


def create_app(state: ApiState) -> FastAPI:
    app = FastAPI(
        title="ai-models catalog-import API",
        dependencies=[Depends(reject_undeclared_query_parameters)],
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.api = state
    app.include_router(routes_catalog.router)
    app.include_router(routes_service.router)
    app.add_exception_handler(ApiProblem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_crash)
    app.add_middleware(RequestMetrics, metrics=state.metrics)
    return app
