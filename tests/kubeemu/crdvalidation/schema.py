"""`CRDSchema`: one CRD version's schema, checked like the apiserver checks it on CRD creation and
applied like the apiserver applies it to custom resources (prune, default, validate)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeemu.crdvalidation.cel import CELRule, compile_rules, evaluate_rule
from kubeemu.crdvalidation.defaulting import apply_defaults, prune
from kubeemu.crdvalidation.errors import FieldError, NonStructuralSchemaError, RuleCompileError
from kubeemu.crdvalidation.node import MISSING, SchemaNode, child_path, index_path
from kubeemu.crdvalidation.openapi import json_equal, validate_value
from kubeemu.crdvalidation.structural import structural_errors

BLOCKING_MESSAGE = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


@dataclass(frozen=True)
class Admission:
    """What the apiserver makes of a written custom resource: the stored form, its errors, and the
    unknown fields it dropped (which `fieldValidation=Strict` turns into a 400)."""

    object: dict[str, Any]
    errors: list[FieldError]
    pruned: list[str]


class CRDSchema:
    def __init__(
        self, raw: Mapping[str, Any], *, schema_path: str, group: str = "", kind: str = "", version: str = ""
    ) -> None:
        self.raw = raw
        self.group = group
        self.kind = kind
        self.version = version
        self.root = SchemaNode.parse(raw, schema_path)
        self._structural = structural_errors(self.root)
        self._rules: list[CELRule] = []
        self._rule_errors: list[str] = []
        self._attach_rules(self.root, location="", is_root=True, correlatable=True)
        self._structural.extend(self._default_errors())

    @classmethod
    def from_crd(cls, crd: Mapping[str, Any], *, version: str | None = None, check: bool = True) -> CRDSchema:
        """The schema of `version` (default: the storage version) of a CRD manifest.

        With `check` (the default) raises NonStructuralSchemaError when the schema is not structural
        (or has invalid defaults), RuleCompileError when a CEL rule does not compile or uses CEL the
        emulator cannot evaluate.
        """
        spec = crd.get("spec") or {}
        versions = spec.get("versions") or []
        index = next(
            (
                i
                for i, v in enumerate(versions)
                if (v.get("name") == version if version else v.get("storage"))
            ),
            None,
        )
        if index is None:
            raise KeyError(f"CRD {crd.get('metadata', {}).get('name')!r} has no version {version!r}")
        entry = versions[index]
        raw = ((entry.get("schema") or {}).get("openAPIV3Schema")) or {}
        schema = cls(
            raw,
            schema_path=f"spec.versions[{index}].schema.openAPIV3Schema",
            group=spec.get("group", ""),
            kind=(spec.get("names") or {}).get("kind", ""),
            version=entry.get("name", ""),
        )
        if check:
            schema.raise_for_errors()
        return schema

    @classmethod
    def from_openapi(
        cls, raw: Mapping[str, Any], *, group: str = "", kind: str = "", check: bool = True
    ) -> CRDSchema:
        schema = cls(raw, schema_path="openAPIV3Schema", group=group, kind=kind)
        if check:
            schema.raise_for_errors()
        return schema

    def raise_for_errors(self) -> None:
        if self._structural:
            raise NonStructuralSchemaError(self._structural + self._rule_errors)
        if self._rule_errors:
            raise RuleCompileError(self._rule_errors)

    def structural_errors(self) -> list[str]:
        """Why the apiserver would reject this schema (structural rules, bad defaults); empty when fine."""
        return list(self._structural)

    def rule_errors(self) -> list[str]:
        """CEL rules that do not compile (or that the emulator cannot evaluate)."""
        return list(self._rule_errors)

    def rules(self) -> list[CELRule]:
        """Every compiled `x-kubernetes-validations` rule, in schema order."""
        return list(self._rules)

    def prune(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        result, removed = prune(obj, self.root)
        return result, removed

    def default(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = apply_defaults(obj, self.root)
        return result

    def default_and_prune(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """What gets stored: unknown fields pruned, then defaults applied (the apiserver's order)."""
        pruned, _ = self.prune(obj)
        return self.default(pruned)

    def validate(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[FieldError]:
        """Schema, list-type and CEL errors for `obj` as is (no defaulting or pruning).

        With `old` (an update) transition rules run and unchanged values are ratcheted.
        """
        errors = validate_value(self.root, obj, "", old=MISSING if old is None else old)
        if any(e.type in ("TypeInvalid", "NotSupported") for e in errors):
            errors.append(FieldError("<nil>", "Invalid", BLOCKING_MESSAGE, value=None))
            return errors
        self._run_rules(self.root, obj, MISSING if old is None else old, "", errors, is_root=True)
        return errors

    def admit(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Admission:
        pruned, removed = self.prune(obj)
        defaulted = self.default(pruned)
        return Admission(object=defaulted, errors=self.validate(defaulted, old), pruned=removed)

    def _attach_rules(self, node: SchemaNode, *, location: str, is_root: bool, correlatable: bool) -> None:
        rules, errors = compile_rules(node, location=location, is_root=is_root, correlatable=correlatable)
        node.rules = rules
        self._rules.extend(rules)
        self._rule_errors.extend(errors)
        for name, prop in node.properties.items():
            self._attach_rules(
                prop, location=child_path(location, name), is_root=False, correlatable=correlatable
            )
        if node.additional is not None:
            self._attach_rules(
                node.additional, location=index_path(location, "*"), is_root=False, correlatable=correlatable
            )
        if node.items is not None:
            self._attach_rules(
                node.items,
                location=index_path(location, "*"),
                is_root=False,
                correlatable=correlatable and node.list_type == "map",
            )

    def _default_errors(self) -> list[str]:
        errors: list[str] = []
        for node in self.root.walk():
            if node.default is MISSING:
                continue
            where = f"{node.schema_path}.default"
            pruned, removed = prune(node.default, node, is_root=False)
            if removed:
                errors.append(
                    f"{where}: Invalid value: {json.dumps(node.default)}: must not have unknown fields"
                )
            for problem in validate_value(node, node.default, "default"):
                errors.append(f"{where}: Invalid value: {json.dumps(node.default)}: {problem}")
            del pruned
        return errors

    def _run_rules(
        self,
        node: SchemaNode,
        value: Any,
        old: Any,
        path: str,
        errors: list[FieldError],
        *,
        is_root: bool = False,
    ) -> None:
        if value is None or value is MISSING:
            return
        has_old = old is not MISSING and old is not None
        unchanged = has_old and json_equal(value, old)
        for rule in node.rules:
            if rule.uses_old_self and not has_old and not rule.optional_old_self:
                continue
            if unchanged and not rule.uses_old_self:
                continue  # ratcheting: an unchanged value is not re-validated
            error = evaluate_rule(
                rule, node=node, value=value, old=old, path=path, is_root=is_root, has_old=has_old
            )
            if error is not None:
                errors.append(error)
        if isinstance(value, dict):
            old_map = old if isinstance(old, dict) else {}
            for key, sub_value in value.items():
                if key in node.properties:
                    self._run_rules(
                        node.properties[key],
                        sub_value,
                        old_map.get(key, MISSING),
                        child_path(path, key),
                        errors,
                    )
                elif node.additional is not None:
                    self._run_rules(
                        node.additional, sub_value, old_map.get(key, MISSING), index_path(path, key), errors
                    )
        elif isinstance(value, list) and node.items is not None:
            olds = self._correlate(node, value, old)
            for i, item in enumerate(value):
                self._run_rules(node.items, item, olds[i], index_path(path, i), errors)

    @staticmethod
    def _correlate(node: SchemaNode, value: list[Any], old: Any) -> list[Any]:
        if node.list_type != "map" or not isinstance(old, list):
            return [MISSING] * len(value)
        keys = node.list_map_keys

        def ident(item: Any) -> str:
            return json.dumps([item.get(k) for k in keys]) if isinstance(item, dict) else ""

        by_key = {ident(item): item for item in old}
        return [by_key.get(ident(item), MISSING) for item in value]
