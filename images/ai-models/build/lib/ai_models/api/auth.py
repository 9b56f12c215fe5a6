"""Who is calling and may they: bearer token -> TokenReview -> SubjectAccessReview.

The api never decides access itself: Kubernetes authenticates the token and evaluates the
caller's RBAC for the virtual cluster-scoped resource `catalogimports.ai.deckhouse.io`, so the
module's access levels (and anything a cluster admin binds) apply as for any resource.

Positive answers are cached for a short TTL, keyed by a SHA-256 of the token (tokens are never
stored, logged or put in an error), so a burst of searches costs one pair of reviews. Refusals are
not cached: a grant takes effect on the next request, a revocation within the TTL.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ai_models.api.metrics import ApiMetrics
from ai_models.api.problems import (
    ApiProblem,
    forbidden,
    kubernetes_error,
    kubernetes_unavailable,
    unauthenticated,
)
from ai_models.names import API_GROUP, CATALOG_IMPORTS_RESOURCE

log = logging.getLogger(__name__)

RESOURCE: Final = f"{CATALOG_IMPORTS_RESOURCE}.{API_GROUP}"
DEFAULT_CACHE_TTL_SECONDS: Final = 10.0
MAX_CACHED: Final = 10_000
# Bounds a header before it is sent anywhere; real tokens (JWTs with many claims) stay far below.
MAX_TOKEN_LENGTH: Final = 16_384
# The API's answer to these means it cannot serve now, not that it refused the request.
_UNAVAILABLE_STATUSES: Final = frozenset({429, 503, 504})
# Which permission the api's own ServiceAccount needs for each call, for error messages.
_NEEDS: Final = {
    "TokenReview": "create on tokenreviews.authentication.k8s.io",
    "SubjectAccessReview": "create on subjectaccessreviews.authorization.k8s.io",
}


@dataclasses.dataclass(frozen=True)
class Subject:
    """The caller as Kubernetes knows it (TokenReview's user info)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


K = TypeVar("K")
V = TypeVar("V")


class _TtlCache(Generic[K, V]):
    """A small LRU with per-entry expiry; thread-safe."""

    def __init__(self, *, ttl_seconds: float, max_entries: int, clock: Callable[[], float]) -> None:
        self._ttl = ttl_seconds
        self._max = max_entries
        self._clock = clock
        self._entries: collections.OrderedDict[K, tuple[float, V]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            expires, value = found
            if self._clock() >= expires:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self._ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; 401 for anything else."""
    if not authorization:
        raise unauthenticated("no credentials: send `Authorization: Bearer <token>` with a Kubernetes token")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise unauthenticated(
            "the Authorization header is not a bearer token: send `Authorization: Bearer <token>`"
        )
    if len(token) > MAX_TOKEN_LENGTH or any(ch.isspace() for ch in token):
        raise unauthenticated("the bearer token is malformed (too long or containing spaces)")
    return token


def _status_message(error: ApiException) -> str:
    """The Kubernetes Status message of an error answer, if it has one."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return ""
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else ""


class Gatekeeper:
    """Authenticates and authorizes each catalog request against the Kubernetes API."""

    def __init__(
        self,
        *,
        api_client: Any,
        request_timeout: tuple[float, float],
        metrics: ApiMetrics,
        cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._authn = client.AuthenticationV1Api(api_client)
        self._authz = client.AuthorizationV1Api(api_client)
        self._timeout = request_timeout
        self._metrics = metrics
        self._subjects: _TtlCache[str, Subject] = _TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )
        self._allowed: _TtlCache[tuple[str, str], bool] = _TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )

    def admit(self, authorization: str | None, *, verb: str) -> Subject:
        """The caller, when Kubernetes says it may `verb` catalogimports; raises ApiProblem otherwise."""
        token = bearer_token(authorization)
        key = hashlib.sha256(token.encode()).hexdigest()
        subject = self._subjects.get(key)
        if subject is None:
            subject = self._review_token(token)
            self._subjects.put(key, subject)
        if self._allowed.get((key, verb)) is None:
            self._review_access(subject, verb=verb)
            self._allowed.put((key, verb), True)
        return subject

    def _call(self, name: str, request: Callable[[], Any]) -> Any:
        """Run one review; Kubernetes failures become 502/503 problems that name the cause."""
        try:
            answer = request()
        except ApiException as error:
            status = error.status or 0
            message = _status_message(error) or str(error.reason or "no message")
            unavailable = status in _UNAVAILABLE_STATUSES
            self._metrics.kubernetes_calls.labels(name, "Unavailable" if unavailable else "Error").inc()
            log.warning("%s failed", name, extra={"status": status, "error": message})
            if unavailable:
                raise kubernetes_unavailable(
                    f"the Kubernetes API cannot answer the {name} now ({status}: {message}); retry later"
                ) from error
            hint = f"; the api's ServiceAccount needs {_NEEDS[name]}" if status in (401, 403) else ""
            raise kubernetes_error(
                f"the Kubernetes API answered the {name} with {status} ({message}){hint}"
            ) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            self._metrics.kubernetes_calls.labels(name, "Unavailable").inc()
            log.warning("%s failed: Kubernetes API unreachable", name, extra={"error": repr(error)})
            raise kubernetes_unavailable(
                f"cannot reach the Kubernetes API for the {name} ({type(error).__name__}); retry later, "
                "and if it persists check the api pod's network access to the API server"
            ) from error
        self._metrics.kubernetes_calls.labels(name, "Success").inc()
        return answer

    def _review_token(self, token: str) -> Subject:
        body = client.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=client.V1TokenReviewSpec(token=token),
        )
        review = self._call(
            "TokenReview", lambda: self._authn.create_token_review(body, _request_timeout=self._timeout)
        )
        status = review.status
        if status is None or not status.authenticated or status.user is None or not status.user.username:
            reason = (status.error if status is not None else None) or "not authenticated"
            raise unauthenticated(
                f"Kubernetes did not accept the bearer token ({reason}); send a valid, unexpired token"
            )
        user = status.user
        return Subject(
            username=user.username,
            uid=user.uid or "",
            groups=tuple(user.groups or ()),
            extra=tuple(sorted((k, tuple(v or ())) for k, v in (user.extra or {}).items())),
        )

    def _review_access(self, subject: Subject, *, verb: str) -> None:
        body = client.V1SubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SubjectAccessReview",
            spec=client.V1SubjectAccessReviewSpec(
                user=subject.username,
                uid=subject.uid or None,
                groups=list(subject.groups),
                extra={k: list(v) for k, v in subject.extra} or None,
                # No namespace: the resource is cluster-scoped, so a namespace-limited grant does
                # not allow it.
                resource_attributes=client.V1ResourceAttributes(
                    group=API_GROUP, resource=CATALOG_IMPORTS_RESOURCE, verb=verb
                ),
            ),
        )
        review = self._call(
            "SubjectAccessReview",
            lambda: self._authz.create_subject_access_review(body, _request_timeout=self._timeout),
        )
        status = review.status
        if status is None or not status.allowed:
            reason = (status.reason if status is not None else None) or "no RBAC rule allows it"
            log.info(
                "request forbidden", extra={"user": subject.username, "verb": verb, "resource": RESOURCE}
            )
            raise forbidden(
                f"user {subject.username!r} may not {verb} {RESOURCE} cluster-wide ({reason}); ask a cluster "
                "administrator for the ai-models User access level without a namespace limit"
            )


__all__ = ["ApiProblem", "Gatekeeper", "Subject", "bearer_token"]
