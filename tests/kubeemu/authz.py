"""RBAC authorization evaluated over the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects
stored in the emulator, following k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubeemu.authn import SUPERUSER_GROUP
from kubeemu.selectors import selector_from_object
from kubeemu.store import Store

RBAC = "rbac.authorization.k8s.io"
ROLES = f"{RBAC}/roles"
CLUSTER_ROLES = f"{RBAC}/clusterroles"
ROLE_BINDINGS = f"{RBAC}/rolebindings"
CLUSTER_ROLE_BINDINGS = f"{RBAC}/clusterrolebindings"


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, in authorizer terms."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def forbidden_message(attrs: Attributes) -> str:
    """The apiserver's text after `... is forbidden: `."""
    if not attrs.resource_request:
        return f'User "{attrs.user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if attrs.namespace:
        return (
            f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group '
            f'"{attrs.api_group}" in the namespace "{attrs.namespace}"'
        )
    return (
        f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
        "at the cluster scope"
    )


def _has(values: Iterable[str], wanted: str) -> bool:
    values = list(values)
    return "*" in values or wanted in values


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if not _has(verbs, attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url in ("*", attrs.path) or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _has(rule.get("apiGroups") or [], attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(
        r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_matches(
    subject: Mapping[str, Any], *, user: str, groups: tuple[str, ...], binding_namespace: str
) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return bool(name == user)
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user == f"system:serviceaccount:{namespace}:{name}"
    return False


class RBACAuthorizer:
    def __init__(self, store: Store) -> None:
        self._store = store

    def authorize(self, attrs: Attributes) -> Decision:
        if SUPERUSER_GROUP in attrs.groups:
            return Decision(True, f'allowed by group "{SUPERUSER_GROUP}"')
        for describe, rules in self._applicable(attrs.user, attrs.groups, attrs.namespace):
            if any(rule_allows(rule, attrs) for rule in rules):
                return Decision(True, f"RBAC: allowed by {describe}")
        return Decision(False, "")

    def rules_for(self, user: str, groups: tuple[str, ...], namespace: str) -> list[Mapping[str, Any]]:
        """Every rule granted to the subject in `namespace` (cluster-wide ones included)."""
        if SUPERUSER_GROUP in groups:
            return [
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ]
        return [rule for _, rules in self._applicable(user, groups, namespace) for rule in rules]

    def _applicable(
        self, user: str, groups: tuple[str, ...], namespace: str
    ) -> Iterator[tuple[str, list[Any]]]:
        bindings, _ = self._store.list_objects(CLUSTER_ROLE_BINDINGS)
        for binding in bindings:
            subject = self._matching_subject(binding, user, groups, "")
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") != "ClusterRole":
                continue
            describe = (
                f'ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole "{ref.get("name")}" '
                f'to {subject.get("kind")} "{subject.get("name")}"'
            )
            yield describe, self._cluster_role_rules(ref.get("name", ""))
        if not namespace:
            return
        bindings, _ = self._store.list_objects(ROLE_BINDINGS, namespace)
        for binding in bindings:
            subject = self._matching_subject(binding, user, groups, namespace)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                rules = self._cluster_role_rules(ref.get("name", ""))
            elif ref.get("kind") == "Role":
                role = self._store.get(ROLES, namespace, ref.get("name", ""))
                rules = list((role or {}).get("rules") or [])
            else:
                continue
            describe = (
                f'RoleBinding "{binding["metadata"]["name"]}/{namespace}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {subject.get("kind")} "{subject.get("name")}"'
            )
            yield describe, rules

    @staticmethod
    def _matching_subject(
        binding: Mapping[str, Any], user: str, groups: tuple[str, ...], namespace: str
    ) -> Mapping[str, Any] | None:
        for subject in binding.get("subjects") or []:
            if subject_matches(subject, user=user, groups=groups, binding_namespace=namespace):
                return dict(subject)
        return None

    def _cluster_role_rules(self, name: str) -> list[Any]:
        role = self._store.get(CLUSTER_ROLES, "", name)
        if role is None:
            return []
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule")
        if isinstance(aggregation, Mapping):
            # What the clusterrole-aggregation controller would have written into `rules`.
            all_roles, _ = self._store.list_objects(CLUSTER_ROLES)
            for selector_obj in aggregation.get("clusterRoleSelectors") or []:
                selector = selector_from_object(selector_obj)
                if selector is None:
                    continue
                for other in all_roles:
                    if other is not role and selector.matches(other["metadata"].get("labels")):
                        rules.extend(other.get("rules") or [])
        return rules
