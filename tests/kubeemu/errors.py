"""Kubernetes `Status` errors, shaped exactly like the apiserver's (reason, code, details, message)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One `details.causes[]` entry of a Status."""

    reason: str
    message: str
    field: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class APIError(Exception):
    """An error the server answers with a `Status` object instead of the requested resource."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    causes: Sequence[Cause] = field(default_factory=tuple)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details = dict(self.details or {})
        if self.causes:
            details["causes"] = [cause.to_json() for cause in self.causes]
        if details:
            out["details"] = details
        return out


def qualified(resource: str, group: str) -> str:
    """`resource.group` as the apiserver prints a GroupResource (`configmaps`, `widgets.example.com`)."""
    return f"{resource}.{group}" if group else resource


def _details(*, group: str, kind: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    return out


def not_found(*, group: str, resource: str, name: str) -> APIError:
    return APIError(
        code=404,
        reason="NotFound",
        message=f'{qualified(resource, group)} "{name}" not found',
        details=_details(group=group, kind=resource, name=name),
    )


def already_exists(*, group: str, resource: str, name: str) -> APIError:
    return APIError(
        code=409,
        reason="AlreadyExists",
        message=f'{qualified(resource, group)} "{name}" already exists',
        details=_details(group=group, kind=resource, name=name),
    )


def conflict(*, group: str, resource: str, name: str, why: str) -> APIError:
    return APIError(
        code=409,
        reason="Conflict",
        message=f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(group=group, kind=resource, name=name),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(*, group: str, kind: str, name: str, causes: Sequence[tuple[str, str, str]]) -> APIError:
    """422 Invalid from field errors given as (cause type, field, error body) triples.

    The message joins `field: body` strings the way a Go `field.ErrorList` aggregate prints:
    one error bare, several in brackets.
    """
    rendered = [f"{fld}: {body}" if fld else body for _, fld, body in causes]
    qualified_kind = f"{kind}.{group}" if group else kind
    if not rendered:
        message = f'{qualified_kind} "{name}" is invalid'
    elif len(rendered) == 1:
        message = f'{qualified_kind} "{name}" is invalid: {rendered[0]}'
    else:
        message = f'{qualified_kind} "{name}" is invalid: [{", ".join(rendered)}]'
    return APIError(
        code=422,
        reason="Invalid",
        message=message,
        details=_details(group=group, kind=kind, name=name),
        causes=tuple(Cause(reason=reason, message=body, field=fld) for reason, fld, body in causes),
    )


def bad_request(message: str) -> APIError:
    return APIError(code=400, reason="BadRequest", message=message)


def forbidden(*, group: str, resource: str, name: str, message: str) -> APIError:
    if not resource:
        text = f"forbidden: {message}"
    elif name:
        text = f'{qualified(resource, group)} "{name}" is forbidden: {message}'
    else:
        text = f"{qualified(resource, group)} is forbidden: {message}"
    return APIError(
        code=403, reason="Forbidden", message=text, details=_details(group=group, kind=resource, name=name)
    )


def unauthorized() -> APIError:
    return APIError(code=401, reason="Unauthorized", message="Unauthorized")


def method_not_allowed(message: str) -> APIError:
    return APIError(code=405, reason="MethodNotAllowed", message=message)


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> APIError:
    return APIError(
        code=415,
        reason="UnsupportedMediaType",
        message=(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}"
            if accepted
            else f"unsupported media type {content_type!r}"
        ),
    )


def expired(message: str) -> APIError:
    return APIError(code=410, reason="Expired", message=message)


def internal(message: str) -> APIError:
    return APIError(code=500, reason="InternalError", message=f"Internal error occurred: {message}")


def path_not_found() -> APIError:
    return APIError(code=404, reason="NotFound", message="the server could not find the requested resource")
