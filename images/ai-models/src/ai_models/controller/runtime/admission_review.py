"""AdmissionReview v1 as the API server sends it and expects it back: the request read defensively,
the answer built with its uid, a JSON patch base64-encoded as `patchType: JSONPatch`.

A body that is not a v1 AdmissionReview with a request uid is refused before any handler sees it;
what the handler decides comes back as `Admission` and is never a raw dict.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request; the message says which part is wrong."""


@dataclasses.dataclass(frozen=True)
class Admission:
    """What the webhook answers: admit (with an optional JSON patch, RFC 6902) or refuse."""

    allowed: bool = True
    patch: Sequence[Mapping[str, Any]] = ()
    message: str = ""
    code: int = 200
    warnings: Sequence[str] = ()

    @classmethod
    def refuse(cls, message: str, *, code: int = 403) -> Admission:
        return cls(allowed=False, message=message, code=code)


def parse_review(body: bytes) -> Mapping[str, Any]:
    """The `request` of an AdmissionReview v1 body."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ReviewError(f"the body is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise ReviewError("the body is not a JSON object")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        raise ReviewError(f"expected kind {KIND} of apiVersion {API_VERSION}")
    request = document.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise ReviewError("the AdmissionReview has no request with a uid")
    return request


def answer(uid: str, admission: Admission) -> dict[str, Any]:
    """The AdmissionReview v1 response for the request `uid`."""
    response: dict[str, Any] = {"uid": uid, "allowed": admission.allowed}
    if admission.patch and admission.allowed:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(admission.patch)).encode()).decode()
    if not admission.allowed or admission.message:
        response["status"] = {
            "code": admission.code,
            "message": admission.message,
            **({"reason": "Forbidden"} if admission.code == 403 else {}),
        }
    if admission.warnings:
        response["warnings"] = list(admission.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
