"""Admission webhook configurations (admissionregistration.k8s.io/v1) as the apiserver reads them.

HTTP-free: the defaults and validation applied when a Mutating- or ValidatingWebhookConfiguration
is written (`default_configuration`, `validate_configuration`: sideEffects must be None or
NoneOnDryRun, a fully qualified webhook name, exactly one of url/service, rules, selectors, match
conditions that compile, timeoutSeconds 1..30, ...), and the predicates that decide whether a
request reaches a webhook (`Webhook.matches_rules`, selectors, `Webhook.match_conditions_hold`),
with the upstream semantics of k8s.io/apiserver/pkg/admission/plugin/webhook:

- rules: `*` in apiGroups/apiVersions/operations; resources `*` (every resource, no
  subresource), `*/*`, `pods/*`, `*/status`; scope `*`, `Cluster` (and Namespace objects),
  `Namespaced`.
- namespaceSelector against the labels of the request's Namespace (a Namespace written is
  matched by its own labels; cluster-scoped objects always match); objectSelector against the
  object's or the old object's labels (either matching is enough).
- matchConditions: CEL over `object`, `oldObject` and `request`, all must hold; an evaluation
  error is reported to the caller, which applies the failurePolicy.

The dispatcher that calls webhooks over HTTPS is `kubeemu.admission` (the HTTP front).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import celpy
import celpy.celtypes as ct
import lark
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubeemu.crdvalidation import FieldError
from kubeemu.crdvalidation.cellib import KUBERNETES_FUNCTIONS, NAMESPACE_BINDINGS
from kubeemu.jsonutil import jsoncopy
from kubeemu.selectors import LabelSelector, selector_from_object

GROUP = "admissionregistration.k8s.io"
MUTATING_STORAGE = f"{GROUP}/mutatingwebhookconfigurations"
VALIDATING_STORAGE = f"{GROUP}/validatingwebhookconfigurations"
WEBHOOK_CONFIGURATION_STORAGE = (MUTATING_STORAGE, VALIDATING_STORAGE)

REVIEW_VERSIONS = ("v1", "v1beta1")  # what the apiserver understands, in its order of preference
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES = ("*", "Cluster", "Namespaced")
_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_REINVOCATION_POLICIES = ("IfNeeded", "Never")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_MATCH_CONDITIONS = 64
DEFAULT_TIMEOUT_SECONDS = 10
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class _GoStrings:
    """A []string value as Go's `%v` prints it in a field error (`[]string{"a", "b"}`)."""

    def __init__(self, items: Any) -> None:
        self.items = [str(i) for i in items] if isinstance(items, list) else []

    def __str__(self) -> str:
        return "[]string{" + ", ".join(f'"{i}"' for i in self.items) + "}"


def _supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


# --- defaults ------------------------------------------------------------------------------------


def default_configuration(obj: Mapping[str, Any], *, mutating: bool) -> dict[str, Any]:
    """A copy with the v1 defaults the apiserver stores (failurePolicy Fail, matchPolicy Equivalent,
    empty selectors, timeoutSeconds 10, reinvocationPolicy Never, rule scope `*`, service port 443)."""
    out = jsoncopy(dict(obj))
    for hook in out.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        defaults: dict[str, Any] = {
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "namespaceSelector": {},
            "objectSelector": {},
            "timeoutSeconds": DEFAULT_TIMEOUT_SECONDS,
        }
        if mutating:
            defaults["reinvocationPolicy"] = "Never"
        _set_defaults(hook, defaults)
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                _set_defaults(rule, {"scope": "*"})
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            _set_defaults(service, {"port": 443})
    return out


def _set_defaults(target: dict[str, Any], defaults: Mapping[str, Any]) -> None:
    """Fill absent or null fields, as Go defaulting does for nil pointers."""
    for key, value in defaults.items():
        if target.get(key) is None:
            target[key] = value


# --- validation ----------------------------------------------------------------------------------


def validate_configuration(obj: Mapping[str, Any], *, mutating: bool) -> list[FieldError]:
    """The apiserver's field errors for a (defaulted) webhook configuration; empty when valid."""
    errors: list[FieldError] = []
    hooks = obj.get("webhooks") or []
    if not isinstance(hooks, list):
        return [FieldError("webhooks", "Invalid", "must be a list", value=_GoStrings(None))]
    seen: set[str] = set()
    for i, hook in enumerate(hooks):
        where = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errors.append(FieldError(where, "Invalid", "must be an object"))
            continue
        name = hook.get("name") or ""
        if name and name in seen:
            errors.append(FieldError(f"{where}.name", "Duplicate", value=name))
        seen.add(name)
        errors.extend(_validate_webhook(hook, where, mutating=mutating))
    return errors


def _validate_webhook(hook: Mapping[str, Any], where: str, *, mutating: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    name = hook.get("name") or ""
    if not name:
        errors.append(FieldError(f"{where}.name", "Required"))
    elif not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        errors.append(
            FieldError(
                f"{where}.name",
                "Invalid",
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                "'-' or '.', and must start and end with an alphanumeric character",
                value=name,
            )
        )
    elif len(name.split(".")) < 3:
        errors.append(
            FieldError(
                f"{where}.name",
                "Invalid",
                "should be a domain with at least three segments separated by dots",
                value=name,
            )
        )
    for j, rule in enumerate(hook.get("rules") or []):
        errors.extend(_validate_rule(rule, f"{where}.rules[{j}]"))
    errors.extend(_validate_policy(hook, where, "failurePolicy", _FAILURE_POLICIES))
    errors.extend(_validate_policy(hook, where, "matchPolicy", _MATCH_POLICIES))
    if mutating:
        errors.extend(_validate_policy(hook, where, "reinvocationPolicy", _REINVOCATION_POLICIES))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(
            FieldError(f"{where}.sideEffects", "Required", f"must specify one of {', '.join(_SIDE_EFFECTS)}")
        )
    elif side_effects not in _SIDE_EFFECTS:
        errors.append(
            FieldError(f"{where}.sideEffects", "NotSupported", _supported(_SIDE_EFFECTS), value=side_effects)
        )
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        errors.append(
            FieldError(
                f"{where}.timeoutSeconds",
                "Invalid",
                "the timeout value must be between 1 and 30 seconds",
                value=timeout,
            )
        )
    errors.extend(_validate_review_versions(hook.get("admissionReviewVersions"), where))
    errors.extend(_validate_client_config(hook.get("clientConfig"), f"{where}.clientConfig"))
    for selector in ("namespaceSelector", "objectSelector"):
        errors.extend(_validate_selector(hook.get(selector), f"{where}.{selector}"))
    errors.extend(_validate_match_conditions(hook.get("matchConditions"), f"{where}.matchConditions"))
    return errors


def _validate_policy(
    hook: Mapping[str, Any], where: str, key: str, allowed: tuple[str, ...]
) -> list[FieldError]:
    value = hook.get(key)
    if value is None or value in allowed:
        return []
    return [FieldError(f"{where}.{key}", "NotSupported", _supported(allowed), value=value)]


def _list_of_strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _validate_rule(rule: Any, where: str) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [FieldError(where, "Invalid", "must be an object")]
    errors: list[FieldError] = []
    operations = _list_of_strings(rule.get("operations"))
    if not operations:
        errors.append(FieldError(f"{where}.operations", "Required"))
    if len(operations) > 1 and "*" in operations:
        errors.append(
            FieldError(
                f"{where}.operations",
                "Invalid",
                "if '*' is present, must not specify other operations",
                value=_GoStrings(operations),
            )
        )
    for k, operation in enumerate(operations):
        if operation not in _OPERATIONS:
            errors.append(
                FieldError(
                    f"{where}.operations[{k}]", "NotSupported", _supported(_OPERATIONS), value=operation
                )
            )
    groups = _list_of_strings(rule.get("apiGroups"))
    if not groups:
        errors.append(FieldError(f"{where}.apiGroups", "Required"))
    if len(groups) > 1 and "*" in groups:
        errors.append(
            FieldError(
                f"{where}.apiGroups",
                "Invalid",
                "if '*' is present, must not specify other API groups",
                value=_GoStrings(groups),
            )
        )
    versions = _list_of_strings(rule.get("apiVersions"))
    if not versions:
        errors.append(FieldError(f"{where}.apiVersions", "Required"))
    if len(versions) > 1 and "*" in versions:
        errors.append(
            FieldError(
                f"{where}.apiVersions",
                "Invalid",
                "if '*' is present, must not specify other API versions",
                value=_GoStrings(versions),
            )
        )
    for k, version in enumerate(versions):
        if not version:
            errors.append(FieldError(f"{where}.apiVersions[{k}]", "Required"))
    errors.extend(_validate_resources(_list_of_strings(rule.get("resources")), f"{where}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in _SCOPES:
        errors.append(FieldError(f"{where}.scope", "NotSupported", _supported(_SCOPES), value=scope))
    return errors


def _validate_resources(resources: list[str], where: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not resources:
        errors.append(FieldError(where, "Required"))
    with_wildcard_sub: set[str] = set()
    sub_with_wildcard_res: set[str] = set()
    double_wildcard = single_wildcard = plain = False
    for i, entry in enumerate(resources):
        if not entry:
            errors.append(FieldError(f"{where}[{i}]", "Required"))
            continue
        double_wildcard |= entry == "*/*"
        single_wildcard |= entry == "*"
        if "/" not in entry:
            plain |= entry != "*"
            continue
        res, sub = entry.split("/", 1)
        if res in with_wildcard_sub:
            errors.append(
                FieldError(
                    f"{where}[{i}]", "Invalid", f"if '{res}/*' is present, must not specify {entry}", entry
                )
            )
        if sub in sub_with_wildcard_res:
            errors.append(
                FieldError(
                    f"{where}[{i}]", "Invalid", f"if '*/{sub}' is present, must not specify {entry}", entry
                )
            )
        if sub == "*":
            with_wildcard_sub.add(res)
        if res == "*":
            sub_with_wildcard_res.add(sub)
    if len(resources) > 1 and double_wildcard:
        errors.append(
            FieldError(
                where,
                "Invalid",
                "if '*/*' is present, must not specify other resources",
                value=_GoStrings(resources),
            )
        )
    if single_wildcard and plain:
        errors.append(
            FieldError(
                where,
                "Invalid",
                "if '*' is present, must not specify other resources without subresources",
                value=_GoStrings(resources),
            )
        )
    return errors


def _validate_review_versions(value: Any, where: str) -> list[FieldError]:
    versions = _list_of_strings(value)
    path = f"{where}.admissionReviewVersions"
    if not versions:
        return [FieldError(path, "Required", f"must specify one of {', '.join(REVIEW_VERSIONS)}")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.append(FieldError(f"{path}[{i}]", "Invalid", "duplicate version", value=version))
        seen.add(version)
    if not seen & set(REVIEW_VERSIONS):
        errors.append(
            FieldError(
                path,
                "Invalid",
                f"must include at least one of {', '.join(REVIEW_VERSIONS)}",
                value=_GoStrings(versions),
            )
        )
    return errors


def _validate_client_config(config: Any, where: str) -> list[FieldError]:
    if not isinstance(config, dict) or ("url" in config) == ("service" in config):
        return [FieldError(where, "Required", "exactly one of url or service is required")]
    errors: list[FieldError] = []
    bundle = config.get("caBundle")
    if bundle is not None:
        try:
            base64.b64decode(str(bundle), validate=True)
        except (binascii.Error, ValueError):
            errors.append(FieldError(f"{where}.caBundle", "Invalid", "illegal base64 data", value="<bytes>"))
    if "url" in config:
        errors.extend(_validate_url(str(config.get("url") or ""), f"{where}.url"))
        return errors
    service = config.get("service")
    path = f"{where}.service"
    if not isinstance(service, dict):
        return [*errors, FieldError(path, "Required", "exactly one of url or service is required")]
    if not service.get("name"):
        errors.append(FieldError(f"{path}.name", "Required", "service name is required"))
    if not service.get("namespace"):
        errors.append(FieldError(f"{path}.namespace", "Required", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errors.append(
            FieldError(
                f"{path}.port", "Invalid", "port is not valid: must be between 1 and 65535, inclusive", port
            )
        )
    url_path = service.get("path")
    if url_path is not None and (not isinstance(url_path, str) or not url_path.startswith("/")):
        errors.append(FieldError(f"{path}.path", "Invalid", "must start with a '/'", value=url_path))
    return errors


def _validate_url(text: str, where: str) -> list[FieldError]:
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        return [FieldError(where, "Invalid", f"url must be a valid URL: {exc}", value=text)]
    problems = []
    if parts.scheme != "https":
        problems.append("'https' is the only allowed URL scheme")
    if not parts.hostname:
        problems.append("host must be specified")
    if parts.username is not None or parts.password is not None:
        problems.append("user information is not permitted in the URL")
    if parts.fragment or "#" in text:
        problems.append("fragments are not permitted in the URL")
    if parts.query or "?" in text:
        problems.append("query parameters are not permitted in the URL")
    return [FieldError(where, "Invalid", problem, value=text) for problem in problems]


def _validate_selector(selector: Any, where: str) -> list[FieldError]:
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [FieldError(where, "Invalid", "must be a label selector")]
    errors: list[FieldError] = []
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        path = f"{where}.matchExpressions[{i}]"
        operator = expr.get("operator") if isinstance(expr, dict) else None
        values = expr.get("values") if isinstance(expr, dict) else None
        if operator not in _SELECTOR_OPERATORS:
            errors.append(
                FieldError(f"{path}.operator", "Invalid", "not a valid selector operator", operator)
            )
        elif operator in ("In", "NotIn") and not values:
            errors.append(
                FieldError(
                    f"{path}.values", "Required", "must be specified when `operator` is 'In' or 'NotIn'"
                )
            )
        elif operator in ("Exists", "DoesNotExist") and values:
            errors.append(
                FieldError(
                    f"{path}.values",
                    "Forbidden",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    return errors


def _validate_match_conditions(conditions: Any, where: str) -> list[FieldError]:
    if conditions is None:
        return []
    if not isinstance(conditions, list):
        return [FieldError(where, "Invalid", "must be a list")]
    errors: list[FieldError] = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        errors.append(FieldError(where, "TooMany", f"must have at most {MAX_MATCH_CONDITIONS} items"))
    seen: set[str] = set()
    for i, raw in enumerate(conditions):
        path = f"{where}[{i}]"
        condition = raw if isinstance(raw, dict) else {}
        name = str(condition.get("name") or "")
        if not name:
            errors.append(FieldError(f"{path}.name", "Required"))
        elif not _QUALIFIED_NAME.match(name.rpartition("/")[2]) or len(name.rpartition("/")[2]) > 63:
            errors.append(
                FieldError(
                    f"{path}.name",
                    "Invalid",
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                    "and end with an alphanumeric character",
                    value=name,
                )
            )
        elif name in seen:
            errors.append(FieldError(f"{path}.name", "Duplicate", value=name))
        seen.add(name)
        expression = str(condition.get("expression") or "")
        if not expression:
            errors.append(FieldError(f"{path}.expression", "Required"))
            continue
        problem = _compile_error(expression)
        if problem:
            errors.append(
                FieldError(
                    f"{path}.expression", "Invalid", f"compilation failed: {problem}", value=expression
                )
            )
    return errors


# --- CEL match conditions ------------------------------------------------------------------------


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


def _compile_error(expression: str) -> str:
    try:
        _environment().compile(expression)
    except (CELParseError, lark.exceptions.LarkError) as exc:
        return " ".join(str(exc).split())
    return ""


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    ast = _environment().compile(expression)
    return _environment().program(ast, functions=KUBERNETES_FUNCTIONS)


@dataclass(frozen=True)
class MatchCondition:
    name: str
    expression: str


# --- webhooks as the dispatcher sees them --------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"

    def matches(
        self, *, operation: str, group: str, version: str, resource: str, subresource: str, namespace: str
    ) -> bool:
        if "*" not in self.operations and operation not in self.operations:
            return False
        if "*" not in self.api_groups and group not in self.api_groups:
            return False
        if "*" not in self.api_versions and version not in self.api_versions:
            return False
        if not any(_resource_matches(entry, resource, subresource) for entry in self.resources):
            return False
        is_namespace = group == "" and resource == "namespaces"
        if self.scope == "Namespaced":
            return not is_namespace and bool(namespace)
        if self.scope == "Cluster":
            return is_namespace or not namespace
        return True


def _resource_matches(entry: str, resource: str, subresource: str) -> bool:
    res, _, sub = entry.partition("/")
    return res in ("*", resource) and sub in ("*", subresource)


@dataclass(frozen=True)
class Webhook:
    """One webhook of a stored (defaulted and validated) configuration."""

    name: str
    configuration: str
    client_config: Mapping[str, Any]
    rules: tuple[Rule, ...]
    failure_policy: str
    match_policy: str
    namespace_selector: LabelSelector | None
    object_selector: LabelSelector | None
    match_conditions: tuple[MatchCondition, ...]
    timeout_seconds: int
    side_effects: str
    review_version: str
    _ca_pem: str = field(default="", repr=False)

    @property
    def fails_closed(self) -> bool:
        return self.failure_policy != "Ignore"

    @property
    def ca_pem(self) -> str:
        """The PEM trust roots of `clientConfig.caBundle` ("" = the system's)."""
        return self._ca_pem

    def matches_rules(
        self, *, operation: str, group: str, version: str, resource: str, subresource: str, namespace: str
    ) -> bool:
        return any(
            rule.matches(
                operation=operation,
                group=group,
                version=version,
                resource=resource,
                subresource=subresource,
                namespace=namespace,
            )
            for rule in self.rules
        )

    def matches_namespace(self, namespace_labels: Mapping[str, str] | None) -> bool:
        """`namespace_labels` None: a cluster-scoped object other than a Namespace (always matches)."""
        if namespace_labels is None:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels)

    def matches_object(self, obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bool:
        selector = self.object_selector
        if selector is None:
            return False
        if selector.empty:
            return True
        return any(
            isinstance(candidate, Mapping) and selector.matches(_labels(candidate))
            for candidate in (obj, old)
        )

    def match_conditions_hold(self, variables: Mapping[str, Any]) -> tuple[bool, str]:
        """(all conditions true, error text); an error means the failurePolicy decides."""
        if not self.match_conditions:
            return True, ""
        activation = {key: json_to_cel(jsoncopy(value)) for key, value in variables.items()}
        activation.update(NAMESPACE_BINDINGS)
        errors: list[str] = []
        for condition in self.match_conditions:
            try:
                result = _program(condition.expression).evaluate(activation)
            except CELEvalError as exc:
                result = exc
            except (TypeError, ValueError, KeyError, IndexError, ArithmeticError, AttributeError) as exc:
                result = CELEvalError(str(exc))
            if isinstance(result, CELEvalError):
                head = result.args[0] if result.args else result
                errors.append(f"expression '{condition.expression}' resulted in error: {head}")
                continue
            if not isinstance(result, ct.BoolType):
                errors.append(f"expression '{condition.expression}' did not evaluate to a bool")
                continue
            if not bool(result):
                return False, ""
        if errors:
            return False, "; ".join(errors)
        return True, ""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def webhooks_of(configuration: Mapping[str, Any]) -> list[Webhook]:
    """The webhooks of a stored configuration, in their listed order."""
    config_name = str((configuration.get("metadata") or {}).get("name") or "")
    out: list[Webhook] = []
    for hook in configuration.get("webhooks") or []:
        client = dict(hook.get("clientConfig") or {})
        bundle = client.get("caBundle") or ""
        ca_pem = base64.b64decode(bundle).decode("ascii", errors="replace") if bundle else ""
        versions = _list_of_strings(hook.get("admissionReviewVersions"))
        review_version = next((v for v in versions if v in REVIEW_VERSIONS), "v1")
        out.append(
            Webhook(
                name=str(hook.get("name") or ""),
                configuration=config_name,
                client_config=client,
                rules=tuple(
                    Rule(
                        operations=tuple(_list_of_strings(r.get("operations"))),
                        api_groups=tuple(_list_of_strings(r.get("apiGroups"))),
                        api_versions=tuple(_list_of_strings(r.get("apiVersions"))),
                        resources=tuple(_list_of_strings(r.get("resources"))),
                        scope=str(r.get("scope") or "*"),
                    )
                    for r in hook.get("rules") or []
                ),
                failure_policy=str(hook.get("failurePolicy") or "Fail"),
                match_policy=str(hook.get("matchPolicy") or "Equivalent"),
                namespace_selector=selector_from_object(hook.get("namespaceSelector", {})),
                object_selector=selector_from_object(hook.get("objectSelector", {})),
                match_conditions=tuple(
                    MatchCondition(name=str(c.get("name")), expression=str(c.get("expression")))
                    for c in hook.get("matchConditions") or []
                ),
                timeout_seconds=int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS),
                side_effects=str(hook.get("sideEffects") or ""),
                review_version=review_version,
                _ca_pem=ca_pem,
            )
        )
    return out
