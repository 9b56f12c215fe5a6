"""`x-kubernetes-validations` rules: compiling them once at CRD load and evaluating them with the
apiserver's semantics (error wording, messageExpression, reason, fieldPath, transition rules)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import celpy
import celpy.celtypes as ct
import lark
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubeemu.crdvalidation.celcheck import check_rule, uses_variable
from kubeemu.crdvalidation.cellib import KUBERNETES_FUNCTIONS, NAMESPACE_BINDINGS
from kubeemu.crdvalidation.celvalues import escape, to_cel
from kubeemu.crdvalidation.errors import FieldError
from kubeemu.crdvalidation.node import SchemaNode, child_path

REASONS = {
    "FieldValueInvalid": "Invalid",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required",
    "FieldValueDuplicate": "Duplicate",
}


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


@dataclass
class CELRule:
    """One `x-kubernetes-validations` entry, located in the schema.

    `schema_path` is where it sits in the CRD (`openAPIV3Schema.properties[spec].properties[source]`);
    `location` is the object path its `self` binds to, with `[*]` for list items and map values
    (`spec.source`, `spec.models[*]`, "" for the root).
    """

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str = ""
    field_path: str = ""
    optional_old_self: bool = False
    schema_path: str = ""
    location: str = ""
    uses_old_self: bool = False
    _program: Any = field(default=None, repr=False, compare=False)
    _message_program: Any = field(default=None, repr=False, compare=False)
    _field_path_parts: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def is_transition_rule(self) -> bool:
        return self.uses_old_self

    def error_text(self) -> str:
        """What the apiserver calls the rule in errors: its message, else the rule text."""
        return self.message.strip() if self.message else self.rule.strip()

    def default_message(self) -> str:
        return self.message.strip() if self.message else f"failed rule: {self.rule.strip()}"


def _compile(text: str) -> lark.Tree[Any]:
    return _environment().compile(text)


_FIELD_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['((?:[^'\\]|\\.)*)'\]")


def _parse_field_path(text: str) -> tuple[str, ...] | None:
    steps: list[str] = []
    pos = 0
    while pos < len(text):
        match = _FIELD_PATH_STEP.match(text, pos)
        if not match:
            return None
        steps.append(match.group(1) if match.group(1) is not None else match.group(2))
        pos = match.end()
    return tuple(steps)


def compile_rules(
    node: SchemaNode, *, location: str, is_root: bool, correlatable: bool
) -> tuple[list[CELRule], list[str]]:
    """Compile the node's `x-kubernetes-validations`; returns the rules and CRD-level errors."""
    rules: list[CELRule] = []
    errors: list[str] = []
    for i, raw in enumerate(node.raw.get("x-kubernetes-validations") or []):
        where = f"{node.schema_path}.x-kubernetes-validations[{i}]"
        if not isinstance(raw, dict) or not isinstance(raw.get("rule"), str) or not raw["rule"].strip():
            errors.append(f"{where}.rule: Required value")
            continue
        rule = CELRule(
            rule=raw["rule"],
            message=raw.get("message") or "",
            message_expression=raw.get("messageExpression") or "",
            reason=raw.get("reason") or "",
            field_path=raw.get("fieldPath") or "",
            optional_old_self=raw.get("optionalOldSelf") is True,
            schema_path=node.schema_path,
            location=location,
        )
        try:
            ast = _compile(rule.rule)
        except (CELParseError, lark.exceptions.LarkError) as exc:
            errors.append(
                f"{where}.rule: Invalid value: {rule.rule!r}: compilation failed: "
                f"{_one_line(str(exc))} (not supported by the emulator's CEL if valid in Kubernetes)"
            )
            continue
        problems = check_rule(ast, self_schema=node, is_root=is_root)
        if problems:
            errors.append(
                f"{where}.rule: Invalid value: {rule.rule!r}: compilation failed: {'; '.join(problems)}"
            )
            continue
        rule.uses_old_self = uses_variable(ast, "oldSelf")
        if rule.uses_old_self and not correlatable:
            errors.append(
                f"{where}.rule: Invalid value: {rule.rule!r}: oldSelf cannot be used on the "
                f"uncorrelatable portion of the schema within {location or '<root>'}"
            )
            continue
        rule._program = _environment().program(ast, functions=KUBERNETES_FUNCTIONS)
        if rule.message_expression:
            try:
                msg_ast = _compile(rule.message_expression)
            except (CELParseError, lark.exceptions.LarkError) as exc:
                errors.append(
                    f"{where}.messageExpression: Invalid value: {rule.message_expression!r}: "
                    f"messageExpression compilation failed: {_one_line(str(exc))}"
                )
                continue
            problems = check_rule(msg_ast, self_schema=node, is_root=is_root)
            if problems:
                errors.append(
                    f"{where}.messageExpression: Invalid value: {rule.message_expression!r}: "
                    f"messageExpression compilation failed: {'; '.join(problems)}"
                )
                continue
            rule._message_program = _environment().program(msg_ast, functions=KUBERNETES_FUNCTIONS)
        if rule.reason and rule.reason not in REASONS:
            errors.append(
                f"{where}.reason: Unsupported value: {rule.reason!r}: supported values: "
                + ", ".join(f'"{r}"' for r in REASONS)
            )
            continue
        if rule.field_path:
            parts = _parse_field_path(rule.field_path)
            if parts is None or not _field_path_exists(node, parts):
                errors.append(
                    f"{where}.fieldPath: Invalid value: {rule.field_path!r}: fieldPath must be a valid "
                    "path: does not refer to a valid field"
                )
                continue
            rule._field_path_parts = parts
        rules.append(rule)
    return rules, errors


def _field_path_exists(node: SchemaNode, parts: tuple[str, ...]) -> bool:
    current: SchemaNode | None = node
    for part in parts:
        if current is None:
            return False
        if part in current.properties:
            current = current.properties[part]
        elif current.additional is not None:
            current = current.additional
        else:
            return False
    return True


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _eval_error_text(exc: BaseException) -> str:
    args = exc.args
    head = str(args[0]) if args else str(exc)
    if head.startswith("no such member in mapping:"):
        return "no such key: " + head.split(":", 1)[1].strip().strip("'")
    if head == "no such key" and len(args) > 2 and args[2]:
        return f"no such key: {args[2][0]}"
    if head == "invalid_argument" and len(args) > 2 and args[2]:
        return f"index out of bounds: {args[2][0]}"
    if "divide by zero" in head:
        return "division by zero"
    if "overflow" in head:
        return "integer overflow"
    return head


def _run(program: Any, activation: dict[str, Any]) -> Any:
    try:
        result = program.evaluate(activation)
    except CELEvalError as exc:
        return exc
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError, AttributeError) as exc:
        return CELEvalError(str(exc), type(exc), exc.args)
    return result


def evaluate_rule(
    rule: CELRule, *, node: SchemaNode, value: Any, old: Any, path: str, is_root: bool, has_old: bool
) -> FieldError | None:
    """Run one rule against `value` at object path `path`; None when it holds."""
    activation: dict[str, Any] = {"self": to_cel(value, node, is_resource=is_root), **NAMESPACE_BINDINGS}
    if rule.uses_old_self:
        activation["oldSelf"] = to_cel(old, node, is_resource=is_root) if has_old else None
    where = path or "<nil>"
    schema_type = node.type or ("object" if node.describes_object() else "")
    result = _run(rule._program, activation)
    if isinstance(result, CELEvalError):
        text = _eval_error_text(result)
        if text.startswith("no such overload") or text.startswith("found no matching overload"):
            detail = (
                f"'no such overload': call arguments did not match a supported operator, function or "
                f"macro signature for rule: {rule.error_text()}"
            )
        else:
            detail = f"{text} evaluating rule: {rule.error_text()}"
        return FieldError(where, "Invalid", detail, value=schema_type, rule=rule)
    if not isinstance(result, ct.BoolType):
        return FieldError(
            where,
            "Invalid",
            f"rule did not evaluate to a bool evaluating rule: {rule.error_text()}",
            value=schema_type,
            rule=rule,
        )
    if bool(result):
        return None
    target = path
    for part in rule._field_path_parts:
        target = child_path(target, part)
    target = target or "<nil>"
    message = rule.default_message()
    if rule._message_program is not None:
        produced = _run(rule._message_program, activation)
        if isinstance(produced, (str, ct.StringType)) and str(produced).strip() and "\n" not in str(produced):
            message = str(produced)
    kind = REASONS.get(rule.reason, "Invalid")
    if kind in ("Required", "Forbidden"):
        return FieldError(target, kind, message, rule=rule)
    if kind == "Duplicate":
        return FieldError(target, kind, value=schema_type, rule=rule)
    return FieldError(target, "Invalid", message, value=schema_type, rule=rule)


__all__ = ["CELRule", "compile_rules", "escape", "evaluate_rule"]
