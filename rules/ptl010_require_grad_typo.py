"""PTL010 require-grad-typo."""
from __future__ import annotations

import libcst as cst

from ptlint.model import Safety
from ptlint.rule import Rule


class RequireGradTypo(Rule):
    """
    ## What it does
    Flags assignments to an attribute named `require_grad`
    (`p.require_grad = False`), the usual misspelling of `requires_grad`.

    Silent when the file also reads `.require_grad` somewhere (then it is a
    deliberate attribute of the project's own class, not a typo) or sets it
    on `self`/`cls`.

    ## Why is this bad?
    Tensors accept any new attribute, so the assignment succeeds and does
    nothing: parameters meant to be frozen keep training (or the reverse),
    with no error and no warning.

    ## Example
    ```python
    for p in backbone.parameters():
        p.require_grad = False
    ```

    Use instead:
    ```python
    for p in backbone.parameters():
        p.requires_grad = False
    ```

    ## Fix safety
    Unsafe: the fix makes the assignment take effect, which is the point but
    changes what the program does (the parameters really are frozen now, so
    training changes), and setting `requires_grad` raises `RuntimeError` on a
    tensor that is not a leaf or on an integer tensor, where the misspelled
    assignment silently did nothing.
    """

    code = "PTL010"
    message = "`require_grad` is a typo of `requires_grad`: this assignment has no effect"
    fix_title = "Rename to `requires_grad`"
    fix_safety = Safety.UNSAFE
    requires_text = ("require_grad",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.targets: list[cst.Attribute] = []
        self.assigned: set[int] = set()
        self.read = False

    def _target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Attribute) and target.attr.value == "require_grad":
            self.assigned.add(id(target))
            if not (isinstance(target.value, cst.Name) and target.value.value in ("self", "cls")):
                self.targets.append(target)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "require_grad" and id(node) not in self.assigned:
            self.read = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self.read:
            return
        for target in self.targets:
            self.report(target, replacement=target.with_changes(attr=cst.Name("requires_grad")))
