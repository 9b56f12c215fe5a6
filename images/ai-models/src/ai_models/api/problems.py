"""Errors the api answers with, as one problem shape (RFC 9457, `application/problem+json`)."""

from __future__ import annotations

import logging
from typing import Final

from ai_models.api.models import Problem, ProblemType
from ai_models.names import MODULE

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE: Final = "application/problem+json"

_TITLES: Final = {
    ProblemType.INVALID_PARAMETER: "Invalid parameter",
    ProblemType.INVALID_PAGE_TOKEN: "Invalid page token",
    ProblemType.UNAUTHENTICATED: "Not authenticated",
    ProblemType.FORBIDDEN: "Forbidden",
    ProblemType.NOT_FOUND: "Not found",
    ProblemType.METHOD_NOT_ALLOWED: "Method not allowed",
    ProblemType.KUBERNETES_ERROR: "Kubernetes API error",
    ProblemType.KUBERNETES_UNAVAILABLE: "Kubernetes API unavailable",
    ProblemType.NOT_READY: "Not ready",
    ProblemType.INTERNAL_ERROR: "Internal error",
    ProblemType.UPLOAD_TOKEN_INVALID: "Upload token not valid",
    ProblemType.UPLOAD_TOKEN_EXPIRED: "Upload token expired",
    ProblemType.OBJECT_GONE: "Object gone",
    ProblemType.WRONG_PHASE: "Wrong phase",
    ProblemType.UPLOAD_CONFLICT: "Upload conflict",
    ProblemType.LENGTH_REQUIRED: "Length required",
    ProblemType.UNSUPPORTED_PAYLOAD: "Unsupported payload",
    ProblemType.INSUFFICIENT_STORAGE: "Insufficient storage",
    ProblemType.STORAGE_USAGE_UNKNOWN: "Storage usage unknown",
    ProblemType.UPLOAD_INCOMPLETE: "Upload incomplete",
    ProblemType.OBJECT_STORE_ERROR: "Object store error",
    ProblemType.RANGE_NOT_SATISFIABLE: "Range not satisfiable",
    ProblemType.TOO_MANY_DOWNLOADS: "Too many downloads",
    ProblemType.REPLICA_BUSY: "Replica busy",
    ProblemType.REQUEST_TIMEOUT: "Request timeout",
}
# The upload URL is the credential, so its 401 challenges with a scheme of its own rather than
# inviting a bearer token that would not help.
UPLOAD_TOKEN_CHALLENGE: Final = f'UploadToken realm="{MODULE}"'


class ApiProblem(Exception):
    """Raised anywhere while answering a request; the app turns it into the problem response."""

    def __init__(
        self, kind: ProblemType, status: int, detail: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.status = status
        self.detail = detail
        self.headers = headers or {}

    def problem(self) -> Problem:
        return Problem(type=self.kind, title=_TITLES[self.kind], status=self.status, detail=self.detail)


def unauthenticated(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.UNAUTHENTICATED, 401, detail, headers={"WWW-Authenticate": "Bearer"})


def forbidden(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.FORBIDDEN, 403, detail)


def not_found(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.NOT_FOUND, 404, detail)


def invalid_parameter(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.INVALID_PARAMETER, 400, detail)


def invalid_page_token(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.INVALID_PAGE_TOKEN, 400, detail)


def kubernetes_error(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.KUBERNETES_ERROR, 502, detail)


def kubernetes_unavailable(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.KUBERNETES_UNAVAILABLE, 503, detail)


def not_ready(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.NOT_READY, 503, detail)


def wrong_phase(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.WRONG_PHASE, 409, detail)


def object_gone(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.OBJECT_GONE, 410, detail)


def object_store_error(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.OBJECT_STORE_ERROR, 502, detail)


def store_failed(error: Exception, detail: str, **context: str) -> ApiProblem:
    """A 502 for a failed object-store call: the store's own words name its bucket, directory or
    endpoint, so they are logged (with `context`) and `detail` alone is answered."""
    log.error("an object store call failed", extra={**context, "detail": detail, "error": str(error)})
    return object_store_error(detail)
