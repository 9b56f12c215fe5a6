"""The create-only review APIs: TokenReview, (Self/Local)SubjectAccessReview, SelfSubjectRulesReview,
SelfSubjectReview, and the ServiceAccount TokenRequest subresource."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kubeemu import errors
from kubeemu.authn import API_SERVER_AUDIENCE, Authenticator, Identity, new_token
from kubeemu.authz import Attributes, RBACAuthorizer
from kubeemu.clock import now, rfc3339
from kubeemu.jsonutil import jsoncopy


def _user_info(identity: Identity) -> dict[str, Any]:
    info: dict[str, Any] = {"username": identity.name, "groups": list(identity.all_groups)}
    if identity.uid:
        info["uid"] = identity.uid
    if identity.extra:
        info["extra"] = {key: list(values) for key, values in identity.extra}
    return info


def _answer(body: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    out = jsoncopy(dict(body))
    out.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    out["status"] = status
    return out


def token_review(authn: Authenticator, body: Mapping[str, Any]) -> dict[str, Any]:
    """As the real apiserver: the token's audiences must meet the review's `spec.audiences` (the API
    server's own when none are given); `status.audiences` is what they share."""
    spec = body.get("spec") or {}
    identity = authn.by_token(str(spec.get("token") or ""))
    if identity is None:
        return _answer(body, {"authenticated": False, "user": {}, "error": "invalid bearer token"})
    wanted = [str(item) for item in spec.get("audiences") or ()] or [API_SERVER_AUDIENCE]
    shared = [item for item in wanted if item in identity.token_audiences]
    if not shared:
        return _answer(
            body,
            {
                "authenticated": False,
                "user": {},
                "error": "[invalid bearer token, token audiences "
                f"{list(identity.token_audiences)} is invalid for the target audiences {wanted}]",
            },
        )
    status: dict[str, Any] = {"authenticated": True, "user": _user_info(identity), "audiences": shared}
    return _answer(body, status)


def _attributes(user: str, groups: tuple[str, ...], spec: Mapping[str, Any]) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(resource, Mapping):
        return Attributes(
            user=user,
            groups=groups,
            verb=resource.get("verb") or "",
            resource_request=True,
            namespace=resource.get("namespace") or "",
            api_group=resource.get("group") or "",
            api_version=resource.get("version") or "",
            resource=resource.get("resource") or "",
            subresource=resource.get("subresource") or "",
            name=resource.get("name") or "",
        )
    if isinstance(non_resource, Mapping):
        return Attributes(
            user=user,
            groups=groups,
            verb=non_resource.get("verb") or "",
            resource_request=False,
            path=non_resource.get("path") or "",
        )
    raise errors.invalid(
        group="authorization.k8s.io",
        kind="SubjectAccessReview",
        name="",
        causes=[
            (
                "FieldValueInvalid",
                "spec.resourceAttributes",
                'Invalid value: "null": exactly one of nonResourceAttributes or '
                "resourceAttributes must be specified",
            )
        ],
    )


def _decide(authz: RBACAuthorizer, attrs: Attributes) -> dict[str, Any]:
    decision = authz.authorize(attrs)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def subject_access_review(
    authz: RBACAuthorizer, body: Mapping[str, Any], *, namespace: str = ""
) -> dict[str, Any]:
    spec = body.get("spec") or {}
    if not spec.get("user") and not spec.get("groups"):
        raise errors.invalid(
            group="authorization.k8s.io",
            kind="SubjectAccessReview",
            name="",
            causes=[
                (
                    "FieldValueInvalid",
                    "spec.user",
                    'Invalid value: "": at least one of user or group must be specified',
                )
            ],
        )
    attrs = _attributes(spec.get("user") or "", tuple(spec.get("groups") or ()), spec)
    if namespace:
        given = (spec.get("resourceAttributes") or {}).get("namespace")
        if given and given != namespace:
            raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        attrs = Attributes(**{**attrs.__dict__, "namespace": namespace})
    return _answer(body, _decide(authz, attrs))


def self_subject_access_review(
    authz: RBACAuthorizer, identity: Identity, body: Mapping[str, Any]
) -> dict[str, Any]:
    attrs = _attributes(identity.name, identity.all_groups, body.get("spec") or {})
    return _answer(body, _decide(authz, attrs))


def self_subject_rules_review(
    authz: RBACAuthorizer, identity: Identity, body: Mapping[str, Any]
) -> dict[str, Any]:
    namespace = (body.get("spec") or {}).get("namespace") or ""
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for rule in authz.rules_for(identity.name, identity.all_groups, namespace):
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])}
            )
        else:
            entry = {k: list(rule.get(k) or []) for k in ("verbs", "apiGroups", "resources", "resourceNames")}
            resource_rules.append({k: v for k, v in entry.items() if v or k == "verbs"})
    return _answer(
        body, {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": False}
    )


def self_subject_review(identity: Identity, body: Mapping[str, Any]) -> dict[str, Any]:
    return _answer(body, {"userInfo": _user_info(identity)})


def token_request(
    authn: Authenticator,
    *,
    namespace: str,
    service_account: str,
    body: Mapping[str, Any],
    bound_pod: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Mint a token that authenticates as the ServiceAccount, bound to `spec.audiences` (the API
    server's when none are named; bound tokens are not time-limited here). `bound_pod`: the Pod
    spec.boundObjectRef names, whose claims the token then carries."""
    spec = dict(body.get("spec") or {})
    seconds = int(spec.get("expirationSeconds") or 3600)
    audiences = tuple(str(item) for item in spec.get("audiences") or ())
    if bound_pod is not None:
        pod_meta = bound_pod.get("metadata") or {}
        identity = Identity.pod_bound(
            namespace,
            service_account,
            pod=str(pod_meta.get("name") or ""),
            pod_uid=str(pod_meta.get("uid") or ""),
            node=str((bound_pod.get("spec") or {}).get("nodeName") or ""),
            audiences=audiences,
        )
    else:
        identity = Identity.service_account(
            namespace, service_account, token=new_token(), audiences=audiences
        )
    authn.add(identity)
    out = _answer(
        body, {"token": identity.token, "expirationTimestamp": rfc3339(now() + timedelta(seconds=seconds))}
    )
    out["apiVersion"], out["kind"] = "authentication.k8s.io/v1", "TokenRequest"
    out["metadata"].update({"name": service_account, "namespace": namespace})
    out["spec"] = {**spec, "expirationSeconds": seconds, "audiences": list(identity.token_audiences)}
    return out
