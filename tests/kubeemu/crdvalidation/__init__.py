"""CustomResourceDefinition schemas enforced like the apiserver does, usable with or without the server.

Public API (stable; the CRD test suite builds on it)::

    from kubeemu.crdvalidation import CRDSchema, FieldError, CELRule
    from kubeemu.crdvalidation import NonStructuralSchemaError, RuleCompileError

    schema = CRDSchema.from_crd(crd_dict, version="v1alpha1")   # default version: the storage one
    #   raises NonStructuralSchemaError (not structural / invalid defaults) or RuleCompileError
    #   (a CEL rule or messageExpression does not compile, names an undeclared field or function,
    #   uses oldSelf where it cannot correlate, or needs CEL the emulator lacks, e.g. `?.` syntax).
    #   Pass check=False to inspect problems instead: schema.structural_errors(), schema.rule_errors().
    schema.structural_errors() -> list[str]      # apiserver-shaped messages, empty when structural
    schema.rules() -> list[CELRule]              # every x-kubernetes-validations rule: .rule, .message,
                                                 # .message_expression, .reason, .field_path,
                                                 # .schema_path, .location ("spec.source", "spec.items[*]")
    schema.prune(obj) -> (pruned, removed_paths)
    schema.default(obj) -> defaulted copy
    schema.default_and_prune(obj) -> what would be stored (prune, then default)
    schema.validate(obj, old=None) -> list[FieldError]   # schema + list-type + CEL; old => update
    schema.admit(obj, old=None) -> Admission(object, errors, pruned)   # the whole write path
    invalid_message(kind=..., group=..., name=..., errors=...) -> str   # the 422 Status message

    FieldError(field="spec.source", type="Invalid", detail="exactly one of ...", value="object", rule=...)
    str(error) == 'spec.source: Invalid value: "object": exactly one of ...'
    error.reason == "FieldValueInvalid"

Semantics follow Kubernetes 1.34: unknown fields pruned unless x-kubernetes-preserve-unknown-fields,
defaults applied after pruning, kube-openapi checks with their messages, x-kubernetes-list-type
set/map uniqueness, CEL rules evaluated at their schema node with escaped property names, rules on
absent values skipped, transition rules (oldSelf) only on updates where the old value correlates,
ratcheting of unchanged values, and CEL skipped when a type error makes the object unreadable.
CEL is cel-python 0.5.0 plus the Kubernetes libraries listed in `kubeemu.crdvalidation.cellib`.
"""

from kubeemu.crdvalidation.cel import CELRule
from kubeemu.crdvalidation.errors import (
    OMIT,
    CRDSchemaError,
    FieldError,
    NonStructuralSchemaError,
    RuleCompileError,
)
from kubeemu.crdvalidation.schema import Admission, CRDSchema


def invalid_message(*, kind: str, group: str, name: str, errors: list[FieldError]) -> str:
    """`Widget.example.com "w1" is invalid: spec.source: Invalid value: ...` (brackets for several)."""
    qualified = f"{kind}.{group}" if group else kind
    rendered = [str(e) for e in errors]
    if not rendered:
        return f'{qualified} "{name}" is invalid'
    if len(rendered) == 1:
        return f'{qualified} "{name}" is invalid: {rendered[0]}'
    return f'{qualified} "{name}" is invalid: [{", ".join(rendered)}]'


__all__ = [
    "OMIT",
    "Admission",
    "CELRule",
    "CRDSchema",
    "CRDSchemaError",
    "FieldError",
    "NonStructuralSchemaError",
    "RuleCompileError",
    "invalid_message",
]
