"""The api's FastAPI applications: routes, one problem shape for every error, request metrics.

Two apps share one state: the public one (catalog-import, upload, serving, contracts, probes)
and the internal TLS one (the lookup API, and the serving API for the node plugin and the
materializers, D159), each behind its own listener, so the lookup path does not exist on the public
port and neither catalog-import nor upload exists on the internal one.

FastAPI's own OpenAPI generation and docs pages are off: each served `openapi.json` is a
contract file, not something derived from the code. No middleware reads or bounds request
bodies: uploads stream through unbuffered and without a size limit.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ai_models.api import routes_service
from ai_models.api.auth import Gatekeeper
from ai_models.api.catalog import routes as routes_catalog
from ai_models.api.contract import query_parameters
from ai_models.api.lookup import routes as routes_lookup
from ai_models.api.metrics import ApiMetrics
from ai_models.api.models import ProblemType
from ai_models.api.problems import PROBLEM_MEDIA_TYPE, ApiProblem, invalid_parameter
from ai_models.api.serving import routes as routes_serving
from ai_models.api.state import ApiState
from ai_models.api.upload import routes as routes_upload
from ai_models.names import (
    CATALOG_IMPORT_API_PREFIX,
    INTERNAL_API_PREFIX,
    MODELS_LOOKUP_PATH,
    SERVING_API_PREFIX,
    UPLOAD_API_PREFIX,
)

log = logging.getLogger(__name__)

UNMATCHED_ROUTE = "unmatched"


def problem_response(problem: ApiProblem) -> Response:
    return Response(
        problem.problem().model_dump_json(),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=problem.headers,
    )


def contract_of(path: str) -> str:
    """The contract document of the API `path` belongs to (each API serves its own)."""
    for prefix in (CATALOG_IMPORT_API_PREFIX, UPLOAD_API_PREFIX, SERVING_API_PREFIX, INTERNAL_API_PREFIX):
        if path == prefix or path.startswith(prefix + "/"):
            return f"{prefix}/openapi.json"
    return f"{CATALOG_IMPORT_API_PREFIX}/openapi.json"


def _parameter_problem(error: RequestValidationError, *, path: str) -> ApiProblem:
    parts = []
    for item in error.errors():
        where = [str(part) for part in item.get("loc", ())]
        place, name = (where[0], ".".join(where[1:])) if len(where) > 1 else ("request", ".".join(where))
        parts.append(f"{place} parameter {name}: {item.get('msg', 'invalid')}")
    return invalid_parameter("; ".join(parts) + f"; see {contract_of(path)} for the accepted values")


PUBLIC_PATHS = (
    f"the public APIs live under {CATALOG_IMPORT_API_PREFIX}, {UPLOAD_API_PREFIX} and {SERVING_API_PREFIX}"
)
INTERNAL_PATHS = (
    f"the internal listener serves only {MODELS_LOOKUP_PATH}, the serving API under {SERVING_API_PREFIX} "
    "and their openapi.json"
)
_METHOD_NOT_ALLOWED = (
    ProblemType.METHOD_NOT_ALLOWED,
    "this path answers only the methods in the Allow header",
)


def reject_undeclared_query_parameters(request: Request) -> None:
    """Refuse query parameters the contract does not declare for the operation.

    A misspelt filter must fail loudly rather than silently return the unfiltered catalog.
    """
    route: Any = request.scope.get("route")
    # Keyed by method too: a HEAD operation declares its parameters apart from its GET twin.
    declared = query_parameters().get((getattr(route, "path_format", ""), request.method), frozenset())
    unknown = sorted(set(request.query_params.keys()) - declared)
    if unknown:
        accepted = ", ".join(sorted(declared)) or "none"
        raise invalid_parameter(
            f"unknown query parameter(s) {', '.join(map(repr, unknown))}; this operation accepts: {accepted}"
        )


async def _on_problem(_request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiProblem)
    return problem_response(error)


async def _on_validation(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    return problem_response(_parameter_problem(error, path=request.url.path))


def _on_http(not_found: str) -> Any:
    async def on_http(_request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        problems = {404: (ProblemType.NOT_FOUND, f"no such path; {not_found}"), 405: _METHOD_NOT_ALLOWED}
        kind, detail = problems.get(error.status_code, (ProblemType.INTERNAL_ERROR, str(error.detail)))
        return problem_response(
            ApiProblem(kind, error.status_code, detail, headers=dict(error.headers or {}))
        )

    return on_http


def route_label(scope: Scope) -> str:
    """The matched route's template: a bounded label, and never a URL (upload URLs carry a secret)."""
    route: Any = scope.get("route")
    return getattr(route, "path_format", None) or UNMATCHED_ROUTE


async def _on_crash(request: Request, error: Exception) -> Response:
    log.error(
        "request failed unexpectedly",
        exc_info=error,
        extra={"route": route_label(request.scope), "method": request.method},
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
            label = route_label(scope)
            seconds = time.perf_counter() - started
            method = scope.get("method", "")
            self.metrics.requests.labels(label, method, str(status)).inc()
            self.metrics.request_duration.labels(label, method).observe(seconds)
            log.debug(
                "request answered",
                extra={"route": label, "method": method, "status": status, "seconds": round(seconds, 4)},
            )


def _app(state: ApiState, *, title: str, routers: list[APIRouter], not_found: str) -> FastAPI:
    app = FastAPI(
        title=title,
        dependencies=[Depends(reject_undeclared_query_parameters)],
        # No trailing-slash redirects: Starlette builds their Location from the Host header, which
        # the client chooses. A path with a slash too many is a 404 problem like any unknown path.
        redirect_slashes=False,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.api = state
    for router in routers:
        app.include_router(router)
    app.add_exception_handler(ApiProblem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(HTTPException, _on_http(not_found))
    app.add_exception_handler(Exception, _on_crash)
    app.add_middleware(RequestMetrics, metrics=state.metrics)
    return app


def create_app(state: ApiState) -> FastAPI:
    """The public listener's app."""
    return _app(
        state,
        title="ai-models APIs",
        routers=[
            routes_catalog.router,
            routes_upload.router,
            routes_serving.router,
            routes_service.serving_contract,
            routes_service.router,
        ],
        not_found=PUBLIC_PATHS,
    )


def create_internal_app(state: ApiState, *, serving_gatekeeper: Gatekeeper) -> FastAPI:
    """The internal TLS listener's app: the lookup API, the serving API the node plugin and the
    materializers read (a Kubernetes token admitted by `serving_gatekeeper`, bound to the module
    audience, D159) and their contracts; nothing else. The state is shared but for that gatekeeper."""
    return _app(
        dataclasses.replace(state, serving_gatekeeper=serving_gatekeeper),
        title="ai-models internal API",
        routers=[routes_lookup.router, routes_serving.router, routes_service.serving_contract],
        not_found=INTERNAL_PATHS,
    )
