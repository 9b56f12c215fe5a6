"""ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1), evaluated as kube-apiserver's
validating policy plugin (k8s.io/apiserver/pkg/admission/plugin/policy/validating) does.

Every CREATE, UPDATE (PUT, PATCH, server-side apply) and DELETE served over HTTP is checked after
mutating admission, schema and metadata validation, under the store lock, so a refusal writes
nothing. For each ValidatingAdmissionPolicyBinding (name order) whose policy exists:

- the policy's `matchConstraints` and the binding's `matchResources` must both match: resourceRules
  (apiGroups, apiVersions, operations, resources with `*`, `*/*`, `pods/*`, `*/status`, scope,
  resourceNames), none of excludeResourceRules, namespaceSelector (against the request's
  Namespace; cluster-scoped objects always match, a Namespace by its own labels) and objectSelector
  (the object's or the old object's labels);
- every matchCondition must hold (false: the policy does not apply; an error: failurePolicy);
- `variables` are evaluated in order, each seeing the earlier ones; a variable that fails is an
  error only where a validation reads it;
- each validation's expression must be true; false refuses with its message (messageExpression
  first, then message, then `failed expression: <expression>`) and reason (Invalid by default:
  422; Forbidden: 403). An expression that fails to evaluate refuses under failurePolicy Fail and
  is skipped under Ignore.

CEL sees `object` and `oldObject` (null on CREATE and DELETE respectively), `request` (kind,
resource, subResource, name, namespace, operation, userInfo with username, uid, groups and
extra, dryRun, options), `namespaceObject` (null for cluster-scoped requests) and `variables`.
Only the binding action Deny refuses; Warn adds a warning-free log line and Audit is ignored.

Not emulated: paramKind/paramRef (a policy naming params is treated as misconfigured: its
failurePolicy decides), matchPolicy Equivalent across versions, auditAnnotations, the
`authorizer` variable, type checking of expressions when a policy is written, and policies on
writes made in-process through `Cluster` (the test bed's controllers).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubeemu import errors
from kubeemu.admission import AdmissionAttributes
from kubeemu.crdvalidation.cellib import KUBERNETES_FUNCTIONS, NAMESPACE_BINDINGS
from kubeemu.jsonutil import jsoncopy
from kubeemu.selectors import LabelSelector, selector_from_object
from kubeemu.store import Store

log = logging.getLogger("kubeemu")

GROUP = "admissionregistration.k8s.io"
POLICY_STORAGE = f"{GROUP}/validatingadmissionpolicies"
BINDING_STORAGE = f"{GROUP}/validatingadmissionpolicybindings"
_NAMESPACE_STORAGE = "/namespaces"
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class _Broken(Exception):
    """The policy cannot be evaluated as written (its failurePolicy decides)."""


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    try:
        ast = _environment().compile(expression)
    except (CELParseError, lark.exceptions.LarkError) as exc:
        raise _Broken(f"compilation failed: {' '.join(str(exc).split())}") from exc
    return _environment().program(ast, functions=KUBERNETES_FUNCTIONS)


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The value, or a CELEvalError (never raised)."""
    try:
        return _program(expression).evaluate(dict(activation))
    except _Broken as exc:
        return CELEvalError(str(exc))
    except CELEvalError as exc:
        return exc
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError, AttributeError) as exc:
        return CELEvalError(str(exc))


def _error_text(expression: str, result: CELEvalError) -> str:
    head = result.args[0] if result.args else result
    return f"expression '{expression}' resulted in error: {head}"


# --- matching ------------------------------------------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _rule_matches(rule: Mapping[str, Any], request: AdmissionAttributes) -> bool:
    rtype = request.rtype
    checks = (
        ("operations", request.operation),
        ("apiGroups", rtype.group),
        ("apiVersions", rtype.version),
    )
    for key, value in checks:
        allowed = _strings(rule.get(key))
        if "*" not in allowed and value not in allowed:
            return False
    if not any(
        res in ("*", rtype.plural) and sub in ("*", request.subresource)
        for res, _, sub in (entry.partition("/") for entry in _strings(rule.get("resources")))
    ):
        return False
    names = _strings(rule.get("resourceNames"))
    if names and request.name not in names:
        return False
    scope = str(rule.get("scope") or "*")
    is_namespace = rtype.storage_key == _NAMESPACE_STORAGE
    if scope == "Namespaced":
        return not is_namespace and bool(request.namespace)
    if scope == "Cluster":
        return is_namespace or not request.namespace
    return True


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _selector(value: Any) -> LabelSelector | None:
    return selector_from_object(value if isinstance(value, Mapping) else {})


def _resources_match(
    match: Mapping[str, Any] | None,
    request: AdmissionAttributes,
    *,
    namespace_labels: Mapping[str, str] | None,
    obj: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None,
    rules_required: bool,
) -> bool:
    """matchConstraints (rules required) or a binding's matchResources (no rules: all the policy's)."""
    match = match or {}
    rules = match.get("resourceRules") or []
    if (rules or rules_required) and not any(
        isinstance(rule, Mapping) and _rule_matches(rule, request) for rule in rules
    ):
        return False
    for rule in match.get("excludeResourceRules") or []:
        if isinstance(rule, Mapping) and _rule_matches(rule, request):
            return False
    if namespace_labels is not None:
        selector = _selector(match.get("namespaceSelector"))
        if selector is None or not selector.matches(namespace_labels):
            return False
    selector = _selector(match.get("objectSelector"))
    if selector is None:
        return False
    return selector.empty or any(
        candidate is not None and selector.matches(_labels(candidate)) for candidate in (obj, old)
    )


# --- the CEL activation ----------------------------------------------------------------------------


def _request_object(request: AdmissionAttributes, obj: Mapping[str, Any] | None) -> dict[str, Any]:
    rtype = request.rtype
    user = request.user
    user_info: dict[str, Any] = {
        "username": user.name,
        "uid": user.uid,
        "groups": list(user.all_groups),
        "extra": {key: list(values) for key, values in user.extra},
    }
    kind = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    resource = {"group": rtype.group, "version": rtype.version, "resource": rtype.plural}
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
    return {
        "kind": kind,
        "resource": resource,
        "subResource": request.subresource,
        "requestKind": kind,
        "requestResource": resource,
        "requestSubResource": request.subresource,
        "name": request.name or str(_meta(obj).get("name") or ""),
        "namespace": request.namespace,
        "operation": request.operation,
        "userInfo": user_info,
        "dryRun": request.dry_run,
        "options": {"kind": options_kind[request.operation], "apiVersion": "meta.k8s.io/v1"},
    }


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


# --- the plugin ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Denial:
    message: str
    reason: str


class ValidatingPolicies:
    """The validating policy plugin over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def configured(self) -> bool:
        return self.store.count(BINDING_STORAGE) > 0

    def check(
        self, request: AdmissionAttributes, obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None
    ) -> None:
        """Raise the refusal of the first binding that denies the write (none: allowed)."""
        if request.rtype.storage_key in (POLICY_STORAGE, BINDING_STORAGE) or not self.configured():
            return
        bindings, _ = self.store.list_objects(BINDING_STORAGE)
        namespace_object, namespace_labels = self._namespace(request, obj)
        base: dict[str, Any] | None = None
        for binding in bindings:
            spec = binding.get("spec") or {}
            policy = self.store.get(POLICY_STORAGE, "", str(spec.get("policyName") or ""))
            if policy is None:
                continue
            policy_spec = policy.get("spec") or {}
            if not _resources_match(
                policy_spec.get("matchConstraints"),
                request,
                namespace_labels=namespace_labels,
                obj=obj,
                old=old,
                rules_required=True,
            ) or not _resources_match(
                spec.get("matchResources"),
                request,
                namespace_labels=namespace_labels,
                obj=obj,
                old=old,
                rules_required=False,
            ):
                continue
            if base is None:
                base = {
                    "object": json_to_cel(jsoncopy(dict(obj))) if obj is not None else None,
                    "oldObject": json_to_cel(jsoncopy(dict(old))) if old is not None else None,
                    "request": json_to_cel(_request_object(request, obj if obj is not None else old)),
                    "namespaceObject": (
                        json_to_cel(jsoncopy(dict(namespace_object)))
                        if namespace_object is not None
                        else None
                    ),
                    **NAMESPACE_BINDINGS,
                }
            denial = _decide(policy, base)
            if denial is None:
                continue
            actions = _strings(spec.get("validationActions"))
            policy_name = str(_meta(policy).get("name"))
            binding_name = str(_meta(binding).get("name"))
            text = (
                f"ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' "
                f"denied request: {denial.message}"
            )
            if "Deny" in actions:
                raise _refusal(request, obj if obj is not None else old, text, denial.reason)
            if "Warn" in actions:
                log.warning("Validation failed (binding action Warn): %s", text)

    def _namespace(
        self, request: AdmissionAttributes, obj: Mapping[str, Any] | None
    ) -> tuple[Mapping[str, Any] | None, Mapping[str, str] | None]:
        """(namespaceObject, the labels namespaceSelector sees: None for cluster-scoped objects)."""
        if request.rtype.storage_key == _NAMESPACE_STORAGE:
            return None, _labels(obj)
        if not request.rtype.namespaced:
            return None, None
        stored = self.store.get(_NAMESPACE_STORAGE, "", request.namespace)
        return stored, _labels(stored) if stored is not None else {}


def _decide(policy: Mapping[str, Any], base: Mapping[str, Any]) -> _Denial | None:
    spec = policy.get("spec") or {}
    fails_closed = str(spec.get("failurePolicy") or "Fail") != "Ignore"

    def broken(message: str) -> _Denial | None:
        if fails_closed:
            return _Denial(message, "Invalid")
        log.warning("Validating policy %s failing open: %s", _meta(policy).get("name"), message)
        return None

    if spec.get("paramKind"):
        return broken("paramKind is not supported by the emulator")
    activation = dict(base)
    for condition in spec.get("matchConditions") or []:
        expression = str(condition.get("expression") or "")
        result = _evaluate(expression, activation)
        if isinstance(result, CELEvalError):
            return broken(_error_text(expression, result))
        if not isinstance(result, ct.BoolType):
            return broken(f"expression '{expression}' did not evaluate to a bool")
        if not bool(result):
            return None
    # A failed variable is stored as its error, which CEL propagates only where it is read.
    variables = ct.MapType()
    activation["variables"] = variables
    for variable in spec.get("variables") or []:
        variables[ct.StringType(str(variable.get("name")))] = _evaluate(
            str(variable.get("expression") or ""), activation
        )
    for validation in spec.get("validations") or []:
        expression = str(validation.get("expression") or "")
        result = _evaluate(expression, activation)
        if isinstance(result, CELEvalError):
            denial = broken(_error_text(expression, result))
            if denial is not None:
                return denial
            continue
        if not isinstance(result, ct.BoolType):
            denial = broken(f"expression '{expression}' did not evaluate to a bool")
            if denial is not None:
                return denial
            continue
        if bool(result):
            continue
        return _Denial(
            _message(validation, expression, activation), str(validation.get("reason") or "Invalid")
        )
    return None


def _message(validation: Mapping[str, Any], expression: str, activation: Mapping[str, Any]) -> str:
    """messageExpression (a non-empty single-line string), else message, else the expression."""
    message_expression = str(validation.get("messageExpression") or "")
    if message_expression:
        value = _evaluate(message_expression, activation)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            return str(value)
    message = str(validation.get("message") or "")
    return message or f"failed expression: {expression}"


def _refusal(
    request: AdmissionAttributes, obj: Mapping[str, Any] | None, text: str, reason: str
) -> errors.APIError:
    """admission.NewForbidden, then the validation's reason and its code (dispatcher.go)."""
    rtype = request.rtype
    name = request.name or str(_meta(obj).get("name") or "")
    forbidden = errors.forbidden(group=rtype.group, resource=rtype.plural, name=name, message=text)
    return errors.APIError(
        code=_CODES.get(reason, 422),  # reasonToCode: any other reason is 422 too
        reason=reason,
        message=forbidden.message,
        details=forbidden.details,
        causes=(errors.Cause(reason="", message=text),),
    )
