"""Edits that wrap an expression: in a method call or a function call."""
from __future__ import annotations

import libcst as cst

# Expressions that `.attr` binds to as a whole, with no parentheses needed.
_ATOMS = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.FormattedString,
    cst.List, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp,
)


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` in parentheses, unless it already has some."""
    if expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def as_receiver(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr`, parenthesized when `expr.attr` would bind to only part of it
    (`a + b`, `-x`, `1`, `x if c else y`, an unparenthesized tuple)."""
    if expr.lpar or isinstance(expr, _ATOMS):
        return expr
    return parenthesized(expr)


def call_method(receiver: cst.BaseExpression, method: str, *args: cst.Arg) -> cst.Call:
    """`receiver.method(*args)`, parenthesizing the receiver where needed:
    `loss` → `loss.detach()`, `loss * n` → `(loss * n).detach()`."""
    return cst.Call(func=cst.Attribute(value=as_receiver(receiver), attr=cst.Name(method)),
                    args=args)


def wrapped_in_call(expr: cst.BaseExpression, dotted: str) -> cst.Call:
    """`dotted(expr)`: `model.state_dict()` → `copy.deepcopy(model.state_dict())`.
    Parentheses around `expr` become redundant and are dropped (except around a
    tuple or a yield, which need them)."""
    redundant = expr.lpar and not isinstance(expr, (cst.Tuple, cst.Yield))
    inner = expr.with_changes(lpar=[], rpar=[]) if redundant else expr
    return cst.Call(func=cst.parse_expression(dotted), args=[cst.Arg(value=inner)])
