"""PTL110 log-of-one-plus."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import last_name
from ptlint.fixers.expressions import as_receiver, bare, is_one, negated
from ptlint.model import Safety
from ptlint.rule import Rule
from ptlint.rules._creation import FLOAT_DTYPES, Resolve, classify, is_dtype


def _one_plus(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` for `1 + x` / `x + 1`, `-x` for `1 - x`; else None."""
    if not isinstance(node, cst.BinaryOperation):
        return None
    if isinstance(node.operator, cst.Add):
        if is_one(node.left):
            return node.right
        if is_one(node.right):
            return node.left
    elif isinstance(node.operator, cst.Subtract) and is_one(node.left):
        return negated(node.right)
    return None


def _float_cast(node: cst.BaseExpression, resolve: Resolve) -> bool:
    """`v.float()`, `v.type(torch.float)`, `v.to(torch.float32)`, `torch.tensor(v,
    dtype=torch.float)`: values just made floats, from counts as a rule (the
    `log(count + 1)` feature transform), where `count + 1` is exact."""
    if not isinstance(node, cst.Call):
        return False
    op = classify(node, resolve)  # a cast's dtype: spelled `torch.X`, or resolved as one
    if op is not None:
        return op.kind == "cast" and last_name(op.dtype) in FLOAT_DTYPES
    return resolve(node.func) in ("torch.tensor", "torch.as_tensor") and any(
        a.keyword is not None and a.keyword.value == "dtype" and is_dtype(a.value, resolve)
        and last_name(a.value) in FLOAT_DTYPES for a in node.args)


def _message(operand: cst.BaseExpression) -> str | None:
    node = operand.with_changes(lpar=[], rpar=[]) if operand.lpar else operand
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract):
        return "`log(1 - x)` loses precision for small `x`; use `torch.log1p(-x)`"
    return None


class LogOfOnePlus(Rule):
    """
    ## What it does
    Flags `torch.log(1 + x)`, `torch.log(x + 1)`, `torch.log(1 - x)` and the
    method forms `(1 + x).log()`, `(1 - x).log()`.

    Not flagged where `x` is a value just cast to a float
    (`torch.log(counts.float() + 1)`, `torch.tensor(v, dtype=torch.float)`,
    `.type(torch.float)`, `.to(torch.float32)`): the `log(count + 1)` feature
    transform, where `count + 1` is exact and nothing is lost.

    ## Why is this bad?
    For small `x`, `1 + x` rounds to `1` (in float32 for any `|x|` below
    about `6e-8`) and the logarithm returns `0` or a value with few correct
    digits. `torch.log1p(x)` computes `log(1 + x)` accurately for every `x`,
    in one kernel instead of two.

    ## Example
    ```python
    import torch
    y = torch.log(1 + x)
    ```

    Use instead:
    ```python
    import torch
    y = torch.log1p(x)
    ```

    ## Fix safety
    Safe. The fix computes the same mathematical value; results change only
    in the last bits, and where `x` is so small that `log(1 + x)` lost its
    digits, where `log1p` returns the accurate value (an absolute change far
    below the float's precision at 1). Integer inputs are promoted to float
    by both.

    ## References
    - [torch.log1p](https://pytorch.org/docs/stable/generated/torch.log1p.html)
    """

    code = "PTL110"
    message = "`log(1 + x)` loses precision for small `x`; use `torch.log1p(x)`"
    fix_title = "Use `log1p`"
    fix_safety = Safety.SAFE
    tags = ("performance",)
    requires_text = ("log",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) and not isinstance(func, cst.Name):
            return
        if self.is_name(func, "torch.log"):
            args = [a for a in node.args if a.keyword is None]
            if len(args) != 1 or args[0].star or any(
                    a.keyword is not None and a.keyword.value != "out" for a in node.args):
                return
            inner = _one_plus(bare(args[0].value))
            if inner is None or _float_cast(bare(inner), self.qualified_name):
                return
            if isinstance(func, cst.Attribute):
                new_func = func.with_changes(attr=cst.Name("log1p"))
            elif self.context.names.lookup("torch") == "torch":
                new_func = cst.parse_expression("torch.log1p")
            else:
                self.report(node)
                return
            new_args = [a.with_changes(value=bare(inner)) if a is args[0] else a for a in node.args]
            self.report(node, message=_message(args[0].value),
                        replacement=node.with_changes(func=new_func, args=new_args))
        elif (isinstance(func, cst.Attribute) and func.attr.value == "log" and not node.args
              and func.value.lpar):
            inner = _one_plus(func.value.with_changes(lpar=[], rpar=[]))
            if inner is None or _float_cast(bare(inner), self.qualified_name):
                return
            new = node.with_changes(func=func.with_changes(value=as_receiver(inner),
                                                           attr=cst.Name("log1p")))
            self.report(node, message=_message(func.value), replacement=new)
