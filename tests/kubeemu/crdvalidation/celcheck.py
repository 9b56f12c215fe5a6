"""Compile-time checks cel-python does not do but the apiserver's CEL type-checker does:
calls to undeclared functions, and field selections the schema does not declare
(`self.sorce` where the schema has `source`). Types are tracked only as far as the schema
says; anything dynamic (preserve-unknown-fields, int-or-string, function results) is unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lark

from kubeemu.crdvalidation.cellib import KNOWN_FUNCTIONS
from kubeemu.crdvalidation.celvalues import escape
from kubeemu.crdvalidation.node import SchemaNode

_MACROS = {"all", "exists", "exists_one", "map", "filter"}


@dataclass(frozen=True)
class _Typed:
    node: SchemaNode | None = None  # a schema-typed value
    resource: bool = False  # the root object (apiVersion/kind/metadata visible)
    meta: bool = False  # root metadata: only name and generateName
    scalar: str = ""  # a known scalar type, e.g. "string" for map keys


_ANY = _Typed()


class CheckError(Exception):
    pass


def _token(tree: lark.Tree[Any], index: int) -> str:
    child = tree.children[index]
    return str(child)


def _position(tree: lark.Tree[Any]) -> str:
    meta = getattr(tree, "meta", None)
    line = getattr(meta, "line", 1) if meta is not None else 1
    column = getattr(meta, "column", 1) if meta is not None else 1
    return f"<input>:{line}:{column}"


def check_rule(ast: lark.Tree[Any], *, self_schema: SchemaNode, is_root: bool) -> list[str]:
    """Type-check errors in cel-go's wording (`ERROR: <input>:1:5: undefined field 'sorce'`)."""
    errors: list[str] = []
    base = _Typed(node=self_schema, resource=is_root)
    _infer(ast, {"self": base, "oldSelf": base}, errors)
    return errors


def uses_variable(ast: lark.Tree[Any], name: str) -> bool:
    return any(str(t.children[0]) == name for t in ast.find_data("ident"))


def _field(typed: _Typed, name: str, tree: lark.Tree[Any], errors: list[str]) -> _Typed:
    if typed.meta:
        if name in ("name", "generateName"):
            return _Typed(scalar="string")
        errors.append(f"ERROR: {_position(tree)}: undefined field '{name}'")
        return _ANY
    node = typed.node
    if node is None:
        return _ANY
    if typed.resource or node.embedded:
        if name in ("apiVersion", "kind"):
            return _Typed(scalar="string")
        if name == "metadata":
            return _Typed(meta=True)
    if node.additional is not None:
        return _Typed(node=node.additional)
    if node.preserve_unknown or node.int_or_string:
        escaped = {escape(k): v for k, v in node.properties.items()}
        sub = escaped.get(name)
        return _Typed(node=sub) if sub is not None else _ANY
    if node.type in ("string", "integer", "number", "boolean", "array"):
        errors.append(f"ERROR: {_position(tree)}: type '{node.type}' does not support field selection")
        return _ANY
    escaped = {escape(k): v for k, v in node.properties.items()}
    if name in escaped:
        return _Typed(node=escaped[name])
    errors.append(f"ERROR: {_position(tree)}: undefined field '{name}'")
    return _ANY


def _element(typed: _Typed) -> _Typed:
    """What a comprehension variable ranges over: list items, or map/object keys (strings)."""
    node = typed.node
    if node is None:
        return _ANY
    if node.type == "array" and node.items is not None:
        return _Typed(node=node.items)
    if node.type == "object" or node.additional is not None:
        return _Typed(scalar="string")
    return _ANY


def _infer(tree: lark.Tree[Any] | lark.Token, env: dict[str, _Typed], errors: list[str]) -> _Typed:
    if not isinstance(tree, lark.Tree):
        return _ANY
    kind = tree.data
    if kind == "ident":
        return env.get(_token(tree, 0), _ANY)
    if kind == "member_dot":
        base = _infer(tree.children[0], env, errors)
        return _field(base, _token(tree, 1), tree, errors)
    if kind == "member_index":
        base = _infer(tree.children[0], env, errors)
        _infer(tree.children[1], env, errors)
        node = base.node
        if node is not None and node.type == "array" and node.items is not None:
            return _Typed(node=node.items)
        if node is not None and node.additional is not None:
            return _Typed(node=node.additional)
        return _ANY
    if kind == "member_dot_arg":
        return _method(tree, env, errors)
    if kind == "ident_arg":
        name = _token(tree, 0)
        if name not in KNOWN_FUNCTIONS and name not in env:
            errors.append(f"ERROR: {_position(tree)}: undeclared reference to '{name}' (in container '')")
        for child in tree.children[1:]:
            _infer(child, env, errors)
        return _ANY
    if kind in {"dot_ident", "dot_ident_arg"}:
        errors.append(f"ERROR: {_position(tree)}: leading-dot identifiers are not supported")
        return _ANY
    if len(tree.children) == 1 and kind in {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
        "paren_expr",
    }:
        return _infer(tree.children[0], env, errors)
    for child in tree.children:
        _infer(child, env, errors)
    return _ANY


def _method(tree: lark.Tree[Any], env: dict[str, _Typed], errors: list[str]) -> _Typed:
    target, name = tree.children[0], _token(tree, 1)
    args = tree.children[2] if len(tree.children) > 2 else None
    base = _infer(target, env, errors)
    if name in _MACROS and isinstance(args, lark.Tree) and args.children:
        variable_tree, *bodies = args.children
        variable = next((str(t.children[0]) for t in variable_tree.find_data("ident")), "")
        scoped = {**env, variable: _element(base)}
        for body in bodies:
            _infer(body, scoped, errors)
        if name in ("map", "filter"):
            return _ANY
        return _Typed(scalar="bool")
    if name not in KNOWN_FUNCTIONS:
        errors.append(f"ERROR: {_position(tree)}: undeclared reference to '{name}' (in container '')")
    if isinstance(args, lark.Tree):
        for child in args.children:
            _infer(child, env, errors)
    return _ANY
