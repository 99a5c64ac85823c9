"""PTL033 tensor-from-tensor."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.names import parameter_names
from ptlint.fixers.arguments import keyword
from ptlint.fixers.expressions import call_method
from ptlint.model import Safety
from ptlint.rule import Rule

_TENSOR = ("torch.tensor",)
# torch functions that return a new tensor nothing else refers to
_FRESH = frozenset(f"torch.{n}" for n in (
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye", "rand", "randn",
    "randint", "randperm", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "randint_like", "tensor", "cat", "stack", "hstack", "vstack",
))
# torch functions that return a tensor (maybe a view of their input)
_RETURNS_TENSOR = _FRESH | frozenset(f"torch.{n}" for n in (
    "from_numpy", "as_tensor", "exp", "log", "sqrt", "abs", "sigmoid", "tanh", "softmax",
    "log_softmax", "matmul", "mm", "bmm", "sum", "mean", "prod", "cumsum", "where", "clamp",
    "flatten", "reshape", "squeeze", "unsqueeze", "transpose", "permute", "argmax", "argmin",
    "masked_select", "nonzero", "bincount", "outer", "einsum", "norm", "diag", "tril", "triu",
    "Tensor.detach",
))
_SPACE = cst.SimpleWhitespace("")


def _kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=_SPACE, whitespace_after=_SPACE))


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= _names(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return {target.value} if isinstance(target, cst.Name) else set()


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    node.visit(_V())
    return found


class TensorFromTensor(Rule):
    """
    ## What it does
    Flags `torch.tensor(x)` where `x` is known to be a tensor already: the
    result of a torch function (`torch.tensor(torch.zeros(3))`,
    `torch.tensor(a.detach())`), or a name assigned one earlier in the same
    function (on every path to the call). Parameters are not trusted, even
    when annotated `torch.Tensor`: callers often pass lists.

    ## Why is this bad?
    `torch.tensor()` is meant for Python data. Given a tensor it copies it,
    detaches it and emits "UserWarning: To copy construct from a tensor, it is
    recommended to use sourceTensor.clone().detach()". The intent, a copy or
    just the same tensor, is unclear, and when the copy was not intended it
    costs an allocation and a memory copy (across devices even, when
    `device=` differs).

    ## Example
    ```python
    import torch
    weights = torch.ones(3)
    target = torch.tensor(weights, dtype=torch.float64)
    ```

    Use instead:
    ```python
    import torch
    weights = torch.ones(3)
    target = weights.detach().clone().to(dtype=torch.float64)
    ```

    ## Fix safety
    The fix is safe: `x.detach().clone()` (followed by `.to(dtype=...,
    device=...)` for those keywords and `.requires_grad_(True)` for
    `requires_grad=True`) gives a tensor with the same values, dtype, device,
    strides and gradient flag, without the warning. A brand-new tensor from a
    torch factory is used as is, without a copy. Calls with other keywords
    (`pin_memory=`) or `*args` are reported without a fix.

    ## References
    - [`torch.tensor`](https://pytorch.org/docs/stable/generated/torch.tensor.html)
    - [`torch.Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    code = "PTL033"
    message = "`torch.tensor()` of a tensor copies it with a warning: use `x.detach().clone()`"
    fix_title = "Use `x.detach().clone()`"
    fix_safety = Safety.SAFE
    requires_text = ("tensor(",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scopes: list[dict[str, bool]] = [{}]  # name -> holds a tensor
        self.branches: list[tuple[dict[str, bool], dict[str, bool] | None]] = []
        self.guards: list[cst.BaseExpression] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # parameters are unknown: an annotation `x: torch.Tensor` is not proof
        # (callers pass lists from configs), and the fix would then break; a
        # parameter hides a tensor of the same name outside
        self.scopes.append(dict.fromkeys(parameter_names(node.params), False))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.scopes.append(dict.fromkeys(parameter_names(node.params), False))

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.scopes.pop()

    def leave_Assign(self, node: cst.Assign) -> None:
        # after the value: in `x = torch.tensor(x)` the argument is the old `x`
        holds = self._is_tensor(node.value)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.scopes[-1][target.target.value] = holds
            else:
                for name in _names(target.target):
                    self.scopes[-1][name] = False

    def visit_For(self, node: cst.For) -> None:
        for name in _names(node.target):
            self.scopes[-1][name] = False

    # `if`/`else` branches: what one branch binds is unknown in the other, and
    # after the `if` a name holds a tensor only if every path says so
    def visit_If_body(self, node: cst.If) -> None:
        self.branches.append((dict(self.scopes[-1]), None))
        self.guards.append(node.test)

    def leave_If_body(self, node: cst.If) -> None:
        before, _ = self.branches.pop()
        self.branches.append((before, dict(self.scopes[-1])))
        self.scopes[-1].clear()
        self.scopes[-1].update(before)
        self.guards.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.guards.append(node.test)

    def leave_If_orelse(self, node: cst.If) -> None:
        self.guards.pop()

    def leave_If(self, node: cst.If) -> None:
        before, body = self.branches.pop()
        orelse = self.scopes[-1]
        for name in set(body or {}) | set(orelse):
            orelse[name] = (body or before).get(name, False) and orelse.get(name, False)

    def _guarded_by_isinstance(self, name: str) -> bool:
        """Inside `if not isinstance(x, torch.Tensor):` (or its `else`)."""
        for test in self.guards:
            for call in _calls(test):
                if (isinstance(call.func, cst.Name) and call.func.value == "isinstance"
                        and call.args and isinstance(call.args[0].value, cst.Name)
                        and call.args[0].value.value == name):
                    return True
        return False

    def _is_tensor(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            for scope in reversed(self.scopes):
                if node.value in scope:
                    return scope[node.value]
            return False
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "detach" and not node.args:
                return True
            if isinstance(func, (cst.Name, cst.Attribute)):
                return self.qualified_name(func) in _RETURNS_TENSOR
        return False

    def _is_fresh(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
            return False
        if self.qualified_name(node.func) not in _FRESH:
            return False
        flag = keyword(node, "requires_grad")
        return flag is None or (isinstance(flag.value, cst.Name) and flag.value.value == "False")

    def visit_Call(self, node: cst.Call) -> None:
        if not isinstance(node.func, (cst.Name, cst.Attribute)) or \
                self.qualified_name(node.func) not in _TENSOR or not node.args:
            return
        data = node.args[0]
        if data.keyword is not None or data.star or not self._is_tensor(data.value):
            return
        if isinstance(data.value, cst.Name) and self._guarded_by_isinstance(data.value.value):
            return
        rest = node.args[1:]
        keywords = {a.keyword.value: a.value for a in rest if a.keyword is not None}
        if len(keywords) != len(rest) or set(keywords) - {"dtype", "device", "requires_grad"}:
            self.report(node)
            return
        value = data.value
        if self._is_fresh(value):
            new = value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "detach":
            new = call_method(value, "clone")  # `x.detach()` already
        else:
            new = call_method(call_method(value, "detach"), "clone")
        moves = [_kwarg(k, keywords[k]) for k in ("device", "dtype") if k in keywords]
        if moves:
            new = call_method(new, "to", *[m.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                           for m in moves[:-1]], moves[-1])
        flag = keywords.get("requires_grad")
        if flag is not None and not (isinstance(flag, cst.Name) and flag.value == "False"):
            new = call_method(new, "requires_grad_", cst.Arg(flag))
        self.report(node, replacement=new)
