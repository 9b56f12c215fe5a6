"""Field errors as the apiserver reports them (k8s.io/apimachinery/pkg/util/validation/field)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubeemu.crdvalidation.cel import CELRule


class _Omitted:
    def __repr__(self) -> str:
        return "<omitted>"


OMIT: Any = _Omitted()

# Go's field.ErrorType values, by the names used here (`FieldError.type`).
_TYPE_TEXT = {
    "Invalid": "Invalid value",
    "TypeInvalid": "Invalid value",
    "Required": "Required value",
    "NotSupported": "Unsupported value",
    "Duplicate": "Duplicate value",
    "TooLong": "Too long",
    "TooMany": "Too many",
    "Forbidden": "Forbidden",
    "NotFound": "Not found",
    "Internal": "Internal error",
}
# Types whose body never shows the offending value.
_VALUELESS = {"Required", "Forbidden", "TooLong", "Internal"}


def go_value(value: Any) -> str:
    """Render a value like Go's `%v`/`%q` in field errors: strings quoted, numbers bare, nil as "null"."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in value.items())
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(json.dumps(v) for v in value) + "}"
    return str(value)


@dataclass(frozen=True)
class FieldError:
    """One validation error.

    `field` is the Go field path (`spec.source`, `spec.items[0].name`, `spec.labels[key]`; "<nil>" for
    the object as a whole), `type` one of Invalid, TypeInvalid, Required, NotSupported, Duplicate,
    TooLong, TooMany, Forbidden, Internal; `detail` the explanation; `value` the offending value (OMIT
    when the apiserver does not print one); `rule` the CEL rule that produced it, if any.
    """

    field: str
    type: str
    detail: str = ""
    value: Any = OMIT
    rule: CELRule | None = None

    @property
    def reason(self) -> str:
        """`details.causes[].reason` of the Status: FieldValueInvalid, FieldValueRequired, ..."""
        return f"FieldValue{self.type}"

    def body(self) -> str:
        """Go's `ErrorBody()`: what follows `field: ` in messages and the cause `message`."""
        text = _TYPE_TEXT.get(self.type, self.type)
        if self.type not in _VALUELESS and self.value is not OMIT:
            text = f"{text}: {go_value(self.value)}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


class CRDSchemaError(Exception):
    """A CRD (version) that the apiserver would refuse to accept."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class NonStructuralSchemaError(CRDSchemaError):
    """openAPIV3Schema is not structural (or otherwise invalid as a CRD schema)."""


class RuleCompileError(CRDSchemaError):
    """A validation rule or messageExpression does not compile, or needs CEL the emulator lacks."""
