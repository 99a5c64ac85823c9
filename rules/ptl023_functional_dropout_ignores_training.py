"""PTL023 functional-dropout-ignores-training."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import has_star_args, keyword, positional, with_keyword
from ptlint.model import Safety
from ptlint.analysis.names import is_named
from ptlint.analysis.statements import last_statement
from ptlint.rule import Rule
from ptlint.analysis.walk import descendants

# function -> default of `training` (torch 2.13, unchanged since 1.x)
_DROPOUTS = {
    "torch.nn.functional.dropout": True,
    "torch.nn.functional.dropout1d": True,
    "torch.nn.functional.dropout2d": True,
    "torch.nn.functional.dropout3d": True,
    "torch.nn.functional.alpha_dropout": False,
    "torch.nn.functional.feature_alpha_dropout": False,
}


def _is_forward(name: str) -> bool:
    """`forward` and the helpers it calls by convention (`forward_features`, `_forward_impl`)."""
    return name == "forward" or name.startswith(("forward_", "_forward"))


class FunctionalDropoutIgnoresTraining(Rule):
    """
    ## What it does
    Flags `F.dropout(x, ...)` (and `dropout1d/2d/3d`, `alpha_dropout`,
    `feature_alpha_dropout`) inside a module's `forward` that does not pass
    `training=`.

    ## Why is this bad?
    Unlike `nn.Dropout`, the functional form does not know whether the module
    is training: it uses its `training` argument, which defaults to `True` for
    `dropout` and `dropout1d/2d/3d`. Dropout then stays on after
    `model.eval()`, so evaluation and inference are random and scaled wrongly.
    `alpha_dropout` and `feature_alpha_dropout` default to `training=False`:
    without the argument they never drop anything, even while training.

    Calls inside an `if` that tests `.training` (`if self.training: x =
    F.dropout(x, p)`) are not flagged, nor are calls after an `if
    self.training:` (or `if not self.training:`) at the top of the method
    whose body returns or raises (what follows runs in one mode only:
    Monte-Carlo dropout sampled in eval mode), nor calls outside
    `forward`-like methods (a Lightning `training_step` only runs while
    training).

    ## Example
    ```python
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def forward(self, x):
            return F.dropout(x, p=0.5)
    ```

    Use instead:
    ```python
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def forward(self, x):
            return F.dropout(x, p=0.5, training=self.training)
    ```

    ## Fix safety
    Unsafe: the fix adds `training=self.training`, which changes what the
    module computes in eval mode (dropout turns off, as intended) or, for
    `alpha_dropout`/`feature_alpha_dropout`, in training mode (dropout turns
    on). Results and checkpoints evaluated before the fix will not be
    reproduced.
    """

    code = "PTL023"
    message = "`{name}` without `training=` inside `forward`: {consequence}"
    fix_title = "Pass `training={owner}.training`"
    fix_safety = Safety.UNSAFE
    requires_text = ("dropout",)

    def __init__(self, context) -> None:
        super().__init__(context)
        # one entry per class or function being visited: the class's bases are
        # known, or the name of `self` for a forward-like method (None otherwise)
        self.stack: list[tuple[str, str | None]] = []
        self.guards = 0  # enclosing `if`s that test `.training`
        self.guarding: set[int] = set()
        # the functions being visited, and the `if self.training: return ...` of each
        # passed so far, which guard the rest of its body
        self.functions: list[tuple[cst.FunctionDef, int]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # a class with no base (or only `object`) is not a module
        bases = [b for b in node.bases if not is_named(b.value, "object")]
        self.stack.append(("class", "module" if bases else None))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = None
        parent = self.stack[-1] if self.stack else None
        if parent is not None and parent[0] == "class":
            params = node.params.posonly_params or node.params.params
            if (parent[1] and _is_forward(node.name.value) and params
                    and not any(is_named(d.decorator, "staticmethod", "classmethod") for d in node.decorators)):
                owner = params[0].name.value
        elif parent is not None:
            owner = parent[1]  # a closure inside forward still sees `self`
        self.stack.append(("function", owner))
        self.functions.append((node, 0))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.pop()
        self.guards -= self.functions.pop()[1]

    def _guard(self, node: cst.If | cst.IfExp) -> None:
        # only inside a forward-like method, where it matters: matching is not free
        if self.stack and self.stack[-1][1] is not None and any(
                type(n) is cst.Attribute and n.attr.value == "training" for n in descendants(node.test)):
            self.guarding.add(id(node))
            self.guards += 1

    def _unguard(self, node: cst.If | cst.IfExp) -> None:
        if id(node) in self.guarding:
            self.guarding.discard(id(node))
            self.guards -= 1

    def visit_If(self, node: cst.If) -> None:
        self._guard(node)

    def leave_If(self, node: cst.If) -> None:
        self._unguard(node)
        if self.functions and self._exits_in_one_mode(node):
            function, count = self.functions[-1]
            self.functions[-1] = (function, count + 1)
            self.guards += 1

    def _exits_in_one_mode(self, node: cst.If) -> bool:
        """`if self.training: return ...` (or `not self.training`, with a `raise`)
        among the statements of the innermost forward-like function itself."""
        test = node.test
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test = test.expression
        function = self.functions[-1][0]
        return (node.orelse is None and self.stack[-1][1] is not None
                and type(test) is cst.Attribute and test.attr.value == "training"
                and type(last_statement(node.body)) in (cst.Return, cst.Raise)
                and any(statement is node for statement in function.body.body))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._guard(node)

    def leave_IfExp(self, node: cst.IfExp) -> None:
        self._unguard(node)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.stack or self.stack[-1][0] != "function" or self.guards:
            return
        owner = self.stack[-1][1]
        func = node.func
        if owner is None or not isinstance(func, (cst.Name, cst.Attribute)):
            return
        if isinstance(func, cst.Attribute) and "dropout" not in func.attr.value:
            return  # cheap test before resolving the name
        qualified = self.qualified_name(node.func)
        if qualified not in _DROPOUTS:
            return
        if keyword(node, "training") is not None or positional(node, 2) is not None:
            return
        if has_star_args(node):
            return
        name = qualified.rsplit(".", 1)[1]
        consequence = ("dropout stays on in eval mode" if _DROPOUTS[qualified]
                       else "it never drops anything, even while training")
        self.report(
            node,
            message=self.message.format(name=name, consequence=consequence),
            replacement=with_keyword(node, "training", f"{owner}.training"),
            fix_title=self.fix_title.format(owner=owner),
        )
