"""PTL112 log-sum-exp."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument
from ptlint.fixers.expressions import as_receiver
from ptlint.model import Safety
from ptlint.rule import Rule


class LogSumExp(Rule):
    """
    ## What it does
    Flags `log(sum(exp(x), dim))` written out, in function or method form:
    `torch.log(torch.sum(torch.exp(x), dim))`, `x.exp().sum(dim).log()`,
    `torch.log(x.exp().sum(dim=1, keepdim=True))`, and their mixes. A sum
    without `dim` (or with `dim=None`) or with `dtype=` is not flagged:
    `torch.logsumexp` needs the dimensions; nor is an exponent already
    shifted, `exp(x - m)`, also through a name bound to such a difference
    in the same function (`x0 = x - m` before `exp(x0)`): the stable form
    written out (`m` the maximum).

    ## Why is this bad?
    `exp(x)` overflows to `inf` in float32 once `x` exceeds about 88 (11 in
    float16), and underflows to `0` below about -104, so the result becomes
    `inf` or `-inf` and its gradient `nan`. `torch.logsumexp(x, dim)`
    subtracts the maximum first: it is exact where the written-out form is,
    finite where it overflows, and a single fused kernel.

    ## Example
    ```python
    import torch
    lse = torch.log(torch.sum(torch.exp(logits), dim=1))
    ```

    Use instead:
    ```python
    import torch
    lse = torch.logsumexp(logits, dim=1)
    ```

    ## Fix safety
    Unsafe. Where the written-out form is finite the results agree to the
    last bits, but where it overflowed or underflowed the fix returns the
    correct finite value instead of `inf`/`-inf` (and gradients instead of
    `nan`), which code downstream may have been written around.

    ## References
    - [torch.logsumexp](https://pytorch.org/docs/stable/generated/torch.logsumexp.html)
    """

    code = "PTL112"
    message = "`log(sum(exp(x)))` overflows for large `x`; use `torch.logsumexp(x, dim)`"
    fix_title = "Use `logsumexp`"
    fix_safety = Safety.UNSAFE
    requires_text = ("exp",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.shifted: list[set[str]] = [set()]  # names bound to `x - m`, per function

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.shifted.append(set())

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.shifted.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        shifted = self.shifted[-1]
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                (shifted.add if _shifted(node.value) else shifted.discard)(target.target.value)

    def _call_of(self, node: cst.BaseExpression, name: str):
        """(operand, extra arguments, function node or None) when `node` is
        `torch.<name>(operand, ...)` or `operand.<name>(...)`; else None."""
        if not isinstance(node, cst.Call) or node.lpar:
            return None
        func = node.func
        if not isinstance(func, (cst.Attribute, cst.Name)) or any(a.star for a in node.args):
            return None
        if self.is_name(func, f"torch.{name}"):
            first = node.args[0] if node.args else None
            if first is None or first.keyword is not None:
                return None
            return first.value, list(node.args[1:]), func
        if isinstance(func, cst.Attribute) and func.attr.value == name:
            if self.qualified_name(func) is not None:
                return None  # a module function (`np.log`), not a tensor method
            return func.value, list(node.args), None
        return None

    def visit_Call(self, node: cst.Call) -> None:
        log = self._call_of(node, "log")
        if log is None or log[1]:
            return
        total = self._call_of(log[0], "sum")
        if total is None:
            return
        operand, sum_args, _ = total
        exp = self._call_of(operand, "exp")
        if exp is None or exp[1] or _shifted(exp[0]) or (
                isinstance(exp[0], cst.Name) and exp[0].value in self.shifted[-1]):
            return
        dims = cst.Call(func=cst.Name("sum"), args=sum_args)
        dim = argument(dims, "dim", 0)
        if dim is None or (isinstance(dim.value, cst.Name) and dim.value.value == "None") or (
                isinstance(dim.value, cst.Tuple) and not dim.value.elements):
            return
        if any(a.keyword is not None and a.keyword.value not in ("dim", "keepdim") for a in sum_args):
            return
        x = exp[0]
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in sum_args]
        func = log[2]
        if isinstance(func, cst.Attribute):
            new = cst.Call(func=func.with_changes(attr=cst.Name("logsumexp")),
                           args=[cst.Arg(value=x.with_changes(lpar=[], rpar=[]) if x.lpar else x), *args])
        elif func is None:
            new = cst.Call(func=cst.Attribute(value=as_receiver(x), attr=cst.Name("logsumexp")),
                           args=args)
        elif self.context.names.lookup("torch") == "torch":
            new = cst.Call(func=cst.parse_expression("torch.logsumexp"), args=[cst.Arg(value=x), *args])
        else:
            self.report(node)
            return
        self.report(node, replacement=new.with_changes(lpar=node.lpar, rpar=node.rpar))


def _shifted(x: cst.BaseExpression) -> bool:
    """`x - m`: the author subtracts (the maximum, as a rule) to keep `exp` finite."""
    return type(x) is cst.BinaryOperation and type(x.operator) is cst.Subtract
