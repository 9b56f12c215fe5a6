"""Who is calling and may they: bearer token -> TokenReview -> SubjectAccessReview.

The api never decides access itself: Kubernetes authenticates the token and evaluates the
caller's RBAC for what the request needs (`Access`): the virtual cluster-scoped resource
`catalogimports.ai.deckhouse.io` for the catalog, the Model or ClusterModel itself for serving
and lookup. The module's access levels (and anything a cluster admin binds) apply as for any
resource.

Positive answers are cached for a short TTL, keyed by a SHA-256 of the token (tokens are never
stored, logged or put in an error), so a burst of requests costs one pair of reviews. Refusals are
not cached: a grant takes effect on the next request, a revocation within the TTL.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from ai_models.adapters.ttl_cache import TtlCache
from ai_models.api.kube_calls import KubeCalls
from ai_models.api.metrics import ApiMetrics
from ai_models.api.problems import ApiProblem, forbidden, unauthenticated
from ai_models.names import API_GROUP, CATALOG_IMPORTS_RESOURCE, ModelKind

log = logging.getLogger(__name__)

RESOURCE: Final = f"{CATALOG_IMPORTS_RESOURCE}.{API_GROUP}"
DEFAULT_CACHE_TTL_SECONDS: Final = 10.0
MAX_CACHED: Final = 10_000
# Bounds a header before it is sent anywhere; real tokens (JWTs with many claims) stay far below.
MAX_TOKEN_LENGTH: Final = 16_384
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


@dataclasses.dataclass(frozen=True)
class Access:
    """What a request needs: `verb` on `resource` of ai.deckhouse.io, in `namespace` (None:
    cluster-wide) and on the object `name` (None: any); `fix` tells a refused caller what to ask for."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    fix: str = ""

    def describe(self) -> str:
        target = f"{self.resource}.{API_GROUP}"
        if self.name is not None:
            target += f" {self.name!r}"
        where = f"in namespace {self.namespace!r}" if self.namespace is not None else "cluster-wide"
        return f"{self.verb} {target} {where}"


def catalog_access(verb: str) -> Access:
    # No namespace: the resource is cluster-scoped, so a namespace-limited grant does not allow it.
    return Access(
        verb=verb,
        resource=CATALOG_IMPORTS_RESOURCE,
        fix="ask a cluster administrator for the ai-models User access level without a namespace limit",
    )


def object_access(kind: ModelKind, *, namespace: str | None, name: str) -> Access:
    """`get` on one Model (in its namespace) or ClusterModel: whoever may read it may use it."""
    if kind is ModelKind.MODEL:
        fix = f"ask for the ai-models User access level in namespace {namespace!r}"
    else:
        fix = "ask a cluster administrator for the ai-models User access level without a namespace limit"
    return Access(
        verb="get",
        resource=kind.plural.value,
        namespace=namespace if kind is ModelKind.MODEL else None,
        name=name,
        fix=fix,
    )


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


class Gatekeeper:
    """Authenticates and authorizes each request against the Kubernetes API.

    With `audiences`, a token is accepted only when Kubernetes says it was issued for one of them
    (the TokenReview names them and its `status.audiences` must hold one): the internal listener's
    serving routes take only the node plugin's module-audience token, never one the API server
    would accept (D159). Without, the API server's own audience, as any Kubernetes client sends."""

    def __init__(
        self,
        *,
        api_client: Any,
        request_timeout: tuple[float, float],
        metrics: ApiMetrics,
        cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        audiences: tuple[str, ...] = (),
    ) -> None:
        self._audiences = audiences
        self._token_reviews = Objects(api_client, TOKEN_REVIEWS, timeout=request_timeout)
        self._access_reviews = Objects(api_client, SUBJECT_ACCESS_REVIEWS, timeout=request_timeout)
        self._calls = KubeCalls(metrics=metrics)
        self._subjects: TtlCache[str, Subject] = TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )
        self._allowed: TtlCache[tuple[str, Access], bool] = TtlCache(
            ttl_seconds=cache_ttl_seconds, max_entries=MAX_CACHED, clock=clock
        )

    def admit(self, authorization: str | None, *, access: Access) -> Subject:
        """The caller, when Kubernetes says it has `access`; raises ApiProblem otherwise."""
        token = bearer_token(authorization)
        key = hashlib.sha256(token.encode()).hexdigest()
        subject = self._subjects.get(key)
        if subject is None:
            subject = self._review_token(token)
            self._subjects.put(key, subject)
        if self._allowed.get((key, access)) is None:
            self._review_access(subject, access)
            self._allowed.put((key, access), True)
        return subject

    def _review_token(self, token: str) -> Subject:
        spec: dict[str, Any] = {"token": token}
        if self._audiences:
            spec["audiences"] = list(self._audiences)
        body = {"apiVersion": TOKEN_REVIEWS.api_version, "kind": TOKEN_REVIEWS.kind, "spec": spec}
        review = self._calls.call(
            "TokenReview", lambda: self._token_reviews.create(body), needs=_NEEDS["TokenReview"]
        )
        status = _mapping((review or {}).get("status"))
        user = _mapping(status.get("user"))
        if not status.get("authenticated") or not user.get("username"):
            reason = status.get("error") or "not authenticated"
            raise unauthenticated(
                f"Kubernetes did not accept the bearer token ({reason}); send a valid, unexpired token"
                + self._audience_fix()
            )
        # A review that ignored the audiences (an old API server, a webhook authenticator) must not
        # let an API-server token through: the answer has to name one of ours.
        granted = status.get("audiences")
        if self._audiences and not (
            isinstance(granted, list) and any(item in self._audiences for item in granted)
        ):
            raise unauthenticated(
                "Kubernetes did not confirm that the bearer token was issued for this API's audience"
                + self._audience_fix()
            )
        extra = _mapping(user.get("extra"))
        return Subject(
            username=str(user["username"]),
            uid=str(user.get("uid") or ""),
            groups=tuple(str(group) for group in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(item) for item in v or ())) for k, v in extra.items())),
        )

    def _audience_fix(self) -> str:
        if not self._audiences:
            return ""
        return (
            f"; this listener takes only tokens issued for the audience {', '.join(self._audiences)} "
            "(a projected ServiceAccount token with that audience), or a delivery token"
        )

    def _review_access(self, subject: Subject, access: Access) -> None:
        attributes = {
            "group": API_GROUP,
            "resource": access.resource,
            "verb": access.verb,
            "namespace": access.namespace,
            "name": access.name,
        }
        spec = {
            "user": subject.username,
            "uid": subject.uid or None,
            "groups": list(subject.groups),
            "extra": {k: list(v) for k, v in subject.extra} or None,
            # Unset attributes are left out, not sent as null: no namespace means cluster-wide.
            "resourceAttributes": _present(attributes),
        }
        body = {
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "kind": SUBJECT_ACCESS_REVIEWS.kind,
            "spec": _present(spec),
        }
        review = self._calls.call(
            "SubjectAccessReview",
            lambda: self._access_reviews.create(body),
            needs=_NEEDS["SubjectAccessReview"],
        )
        status = _mapping((review or {}).get("status"))
        if not status.get("allowed"):
            reason = status.get("reason") or "no RBAC rule allows it"
            log.info(
                "request forbidden",
                extra={
                    "user": subject.username,
                    "verb": access.verb,
                    "resource": f"{access.resource}.{API_GROUP}",
                    "namespace": access.namespace,
                    "object": access.name,
                },
            )
            raise forbidden(f"user {subject.username!r} may not {access.describe()} ({reason}); {access.fix}")


def _mapping(value: Any) -> Mapping[str, Any]:
    """A review's part as a mapping; a missing or malformed part reads as empty (not allowed)."""
    return value if isinstance(value, Mapping) else {}


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


__all__ = ["Access", "ApiProblem", "Gatekeeper", "Subject", "bearer_token", "catalog_access", "object_access"]
