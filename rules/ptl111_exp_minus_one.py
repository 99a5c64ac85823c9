"""PTL111 exp-minus-one."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.expressions import is_one
from ptlint.model import Safety
from ptlint.rule import Rule


class ExpMinusOne(Rule):
    """
    ## What it does
    Flags `torch.exp(x) - 1`, `x.exp() - 1` and `1 - torch.exp(x)`.

    ## Why is this bad?
    For small `x`, `exp(x)` is close to `1` and the subtraction cancels most
    of its digits: in float32, `torch.exp(x) - 1` is `0` for any `|x|` below
    about `6e-8`. `torch.expm1(x)` computes `exp(x) - 1` accurately for every
    `x`, in one kernel instead of two.

    ## Example
    ```python
    import torch
    y = torch.exp(x) - 1
    ```

    Use instead:
    ```python
    import torch
    y = torch.expm1(x)
    ```

    ## Fix safety
    Safe. The fix computes the same mathematical value (`1 - exp(x)` becomes
    `-expm1(x)`); results change only in the last bits, and for tiny `x`,
    where `expm1` returns the accurate value instead of `0`.

    ## References
    - [torch.expm1](https://pytorch.org/docs/stable/generated/torch.expm1.html)
    """

    code = "PTL111"
    message = "`exp(x) - 1` loses precision for small `x`; use `torch.expm1(x)`"
    fix_title = "Use `expm1`"
    fix_safety = Safety.SAFE
    tags = ("performance",)
    requires_text = ("exp",)

    def _expm1(self, node: cst.BaseExpression) -> cst.Call | None:
        """`torch.expm1(x)` / `x.expm1()` for `torch.exp(x)` / `x.exp()`."""
        if not isinstance(node, cst.Call) or node.lpar:
            return None
        func = node.func
        if not isinstance(func, (cst.Attribute, cst.Name)):
            return None
        if self.is_name(func, "torch.exp"):
            if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                return None
            if isinstance(func, cst.Attribute):
                return node.with_changes(func=func.with_changes(attr=cst.Name("expm1")))
            if self.context.names.lookup("torch") == "torch":
                return node.with_changes(func=cst.parse_expression("torch.expm1"))
            return None
        if isinstance(func, cst.Attribute) and func.attr.value == "exp" and not node.args:
            if self.qualified_name(func) is not None:
                return None  # `math.exp`, `np.exp`: a module function, not a tensor method
            return node.with_changes(func=func.with_changes(attr=cst.Name("expm1")))
        return None

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Subtract):
            return
        if is_one(node.right):
            new = self._expm1(node.left)
            if new is not None:
                self.report(node, replacement=new.with_changes(lpar=node.lpar, rpar=node.rpar))
        elif is_one(node.left):
            new = self._expm1(node.right)
            if new is not None:
                minus = cst.UnaryOperation(operator=cst.Minus(), expression=new,
                                           lpar=node.lpar, rpar=node.rpar)
                self.report(node, message="`1 - exp(x)` loses precision for small `x`; use "
                                          "`-torch.expm1(x)`", replacement=minus)
