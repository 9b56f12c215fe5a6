"""Errors the api answers with, as one problem shape (RFC 9457, `application/problem+json`)."""

from __future__ import annotations

from typing import Final

from ai_models.api.models import Problem, ProblemType

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
}


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
