"""Bearer-token authentication: every token maps to an identity (user name + groups), as a static
token file does for a real apiserver. Unknown or missing tokens are rejected with 401.

A token carries audiences, as a ServiceAccount token does: none named means the API server's own
(`API_SERVER_AUDIENCE`, what a legacy or default projected token has). The API server accepts a
token only when the API server's audience is among them (a token bound to another audience is
refused with 401, as by a real apiserver); a TokenReview checks them against its `spec.audiences`."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

SUPERUSER_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
SUPERUSER_NAME = "kubeemu-admin"
# userInfo.extra keys of a pod-bound ServiceAccount token (pkg/serviceaccount/claims.go).
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID_EXTRA = "authentication.kubernetes.io/credential-id"
# The real apiserver's default audience is its service-account issuer.
API_SERVER_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


@dataclass(frozen=True)
class Identity:
    """A user the emulator recognises by its bearer token."""

    name: str
    token: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    # Empty: the API server's audience only.
    audiences: tuple[str, ...] = ()
    # userInfo.extra as (key, values) pairs: a pod-bound ServiceAccount token carries the
    # authentication.kubernetes.io/{pod-name,pod-uid,node-name,credential-id} claims here.
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def service_account(
        cls,
        namespace: str,
        name: str,
        *,
        token: str | None = None,
        audiences: tuple[str, ...] = (),
        extra: tuple[tuple[str, tuple[str, ...]], ...] = (),
    ) -> Identity:
        """The identity Kubernetes gives a ServiceAccount token (bound to `audiences`, when named)."""
        return cls(
            name=f"system:serviceaccount:{namespace}:{name}",
            token=token or new_token(),
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"),
            audiences=audiences,
            extra=extra,
        )

    @classmethod
    def pod_bound(
        cls,
        namespace: str,
        name: str,
        *,
        pod: str,
        pod_uid: str,
        node: str,
        audiences: tuple[str, ...] = (),
    ) -> Identity:
        """A ServiceAccount token bound to a Pod (projected volume, or a TokenRequest whose
        boundObjectRef is the Pod): its claims as the apiserver puts them in userInfo.extra."""
        token = new_token()
        claims = {
            NODE_NAME_EXTRA: (node,),
            POD_NAME_EXTRA: (pod,),
            POD_UID_EXTRA: (pod_uid,),
            CREDENTIAL_ID_EXTRA: (f"JTI={token[:16]}",),
        }
        return cls.service_account(
            namespace,
            name,
            token=token,
            audiences=audiences,
            extra=tuple((k, v) for k, v in claims.items() if v[0]),
        )

    @classmethod
    def superuser(cls, token: str | None = None) -> Identity:
        return cls(name=SUPERUSER_NAME, token=token or new_token(), groups=(SUPERUSER_GROUP,))

    @property
    def all_groups(self) -> tuple[str, ...]:
        """Groups as the apiserver reports them: every authenticated user is in system:authenticated."""
        if AUTHENTICATED_GROUP in self.groups:
            return self.groups
        return (*self.groups, AUTHENTICATED_GROUP)

    @property
    def token_audiences(self) -> tuple[str, ...]:
        return self.audiences or (API_SERVER_AUDIENCE,)

    @property
    def service_account_ref(self) -> tuple[str, str] | None:
        parts = self.name.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            return parts[2], parts[3]
        return None


def new_token() -> str:
    return secrets.token_urlsafe(24)


class Authenticator:
    def __init__(self, identities: list[Identity]) -> None:
        self._lock = threading.Lock()
        self._by_token = {identity.token: identity for identity in identities}

    def add(self, identity: Identity) -> None:
        with self._lock:
            self._by_token[identity.token] = identity

    def by_token(self, token: str) -> Identity | None:
        with self._lock:
            return self._by_token.get(token)

    def authenticate(self, authorization_header: str | None) -> Identity | None:
        if not authorization_header:
            return None
        scheme, _, token = authorization_header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        identity = self.by_token(token.strip())
        if identity is None or API_SERVER_AUDIENCE not in identity.token_audiences:
            return None
        return identity
