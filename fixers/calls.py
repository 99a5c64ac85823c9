"""Edits to what a call calls."""
from __future__ import annotations

import libcst as cst


def rename_call(call: cst.Call, dotted: str) -> cst.Call:
    """`call` calling `dotted` (e.g. "torch.linalg.qr") instead, same arguments."""
    return call.with_changes(func=cst.parse_expression(dotted))


def replace_attribute(node: cst.Attribute, name: str) -> cst.Attribute:
    """`x.old` → `x.name`."""
    return node.with_changes(attr=cst.Name(name))




def called(node: cst.BaseExpression) -> cst.Call:
    """`node()`: the expression called with no arguments (`torch.no_grad` → `torch.no_grad()`)."""
    lpar, rpar = getattr(node, "lpar", ()), getattr(node, "rpar", ())
    if lpar:  # `(torch.no_grad)` → `(torch.no_grad())`
        node = node.with_changes(lpar=[], rpar=[])
    return cst.Call(func=node, lpar=lpar, rpar=rpar)
