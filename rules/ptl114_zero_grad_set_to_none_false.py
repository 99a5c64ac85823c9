"""PTL114 zero-grad-set-to-none-false."""
from __future__ import annotations

import libcst as cst
from packaging.version import Version

from ptlint.fixers.arguments import argument, without_keywords
from ptlint.model import Safety
from ptlint.rule import Rule
from ptlint.rules._tests import TracksTests


class ZeroGradSetToNoneFalse(TracksTests, Rule):
    """
    ## What it does
    Flags `.zero_grad(set_to_none=False)` (also `.zero_grad(False)`) on an
    optimizer or a module.

    Silent in tests (test files, `test*` functions, `Test*` classes) and in
    a file that updates `.grad` in place (`p.grad += g`,
    `p.grad.add_(g)`, `p.grad[...] = ...`): there the zeros are read, and
    keeping them is deliberate.

    ## Why is this bad?
    Filling every gradient with zeros is a memory write per parameter on each
    step, and the next backward then adds into those zeros instead of writing
    the gradient directly. With `set_to_none=True`, the default since torch
    2.0, the gradients are dropped, memory is freed until the next backward,
    and optimizers skip parameters that received no gradient.

    ## Example
    ```python
    optimizer.zero_grad(set_to_none=False)
    ```

    Use instead:
    ```python
    optimizer.zero_grad()
    ```

    ## Fix safety
    Unsafe. The fix removes the argument (for target torch versions before
    2.0, where `False` was the default, it passes `set_to_none=True`).
    Afterwards `.grad` is `None` instead of a zero tensor between
    `zero_grad()` and the next backward: code that reads it there
    (`p.grad.norm()`, `p.grad.add_(...)`) raises, and optimizers no longer
    update parameters that got no gradient this step (with momentum or
    weight decay, a zero gradient still moved them).

    ## References
    - [Performance tuning guide: use `set_to_none=True`](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#use-parameter-grad-none-instead-of-model-zero-grad-or-optimizer-zero-grad)
    """

    code = "PTL114"
    message = "`zero_grad(set_to_none=False)` writes zeros into every gradient"
    fix_title = "Let `zero_grad()` set gradients to `None`"
    fix_safety = Safety.UNSAFE
    tags = ("performance",)
    requires_text = ("zero_grad",)
    torch_versions = ">=1.7"

    def __init__(self, context) -> None:
        super().__init__(context)
        self.pending: list[tuple[cst.Call, cst.Call]] = []
        self.grad_updated_in_place = False

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _is_grad(node.target):
            self.grad_updated_in_place = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Subscript) and _is_grad(node.target.value):
            self.grad_updated_in_place = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self.grad_updated_in_place:
            for node, new in self.pending:
                self.report(node, replacement=new)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value.endswith("_")
                and not func.attr.value.startswith("_") and _is_grad(func.value)):
            self.grad_updated_in_place = True  # `p.grad.add_(g)`
        if not isinstance(func, cst.Attribute) or func.attr.value != "zero_grad" or self.in_test:
            return  # (test code: speed does not matter there)
        if any(a.star for a in node.args) or len(node.args) != 1:
            return
        flag = argument(node, "set_to_none", 0)
        if flag is None or not (isinstance(flag.value, cst.Name) and flag.value.value == "False"):
            return
        version = self.context.torch_version
        if version is not None and version < Version("2.0"):
            new = node.with_changes(args=[cst.Arg(
                value=cst.Name("True"), keyword=cst.Name("set_to_none"),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")))])
        elif flag.keyword is not None:
            new = without_keywords(node, "set_to_none")
        else:
            new = node.with_changes(args=[])
        self.pending.append((node, new))


def _is_grad(node: cst.BaseExpression) -> bool:
    """`x.grad` or `x.grad.data`."""
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == "grad"
