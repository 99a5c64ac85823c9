"""PTL120 grad-scaler-in-loop."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.analysis.training import SCALERS
from ptlint.analysis.walk import descendants
from ptlint.fixers.statements import insert_before, without_statement
from ptlint.model import Safety
from ptlint.rule import Rule

_SCALER_METHODS = ("scale", "step", "update", "unscale_")
# names a loop binds: its targets, assignments, `with ... as`, walrus, nested loop targets
_BINDERS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)


def _bound_names(loop: cst.For | cst.While) -> set[str]:
    names: set[str] = set()
    for node in descendants(loop):
        if not isinstance(node, _BINDERS):
            continue
        target = getattr(node, "target", None) or getattr(node, "name", None)
        if target is not None:
            names.update(_used_names(target))
    return names


def _used_names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in descendants(node) if type(n) is cst.Name}


class GradScalerInLoop(Rule):
    """
    ## What it does
    Flags `GradScaler(...)` created inside the loop that uses it
    (`scaler.scale(loss)`, `scaler.step(optimizer)`), e.g. inside
    `for batch in loader:`.

    ## Why is this bad?
    A `GradScaler` learns its scale over many steps: it starts high (65536),
    halves it whenever gradients overflow (skipping that optimizer step) and
    grows it again after 2000 clean steps. A new scaler every iteration forgets
    all of that: every step starts from the initial scale, so a model whose
    fp16 gradients overflow at that scale skips every single step and never
    trains, and the skipped-step bookkeeping and `state_dict()` are lost.

    A loop that also creates the optimizer (a fresh training run per
    configuration or trial) is not flagged, nor is a creation inside an `if`
    in the loop (lazy creation on the first iteration).

    ## Example
    ```python
    import torch

    def train(model, optimizer, loader):
        for x, y in loader:
            scaler = torch.amp.GradScaler("cuda")
            loss = model(x, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    ```

    Use instead:
    ```python
    import torch

    def train(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            loss = model(x, y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    ```

    ## Fix safety
    Unsafe: the fix moves the statement before the loop, so the scale carries
    over between iterations and steps that used to be skipped may now run
    (that is the point, but training results change). It is offered only when
    the statement sits directly in the loop's body and its arguments use no
    name the loop assigns.
    """

    code = "PTL120"
    message = "`GradScaler` created inside the loop that uses it: its scale restarts every iteration"
    fix_title = "Create the scaler once, before the loop"
    fix_safety = Safety.UNSAFE
    tags = ("performance",)
    requires_text = ("GradScaler",)

    semantic = True

    def visit_Assign(self, node: cst.Assign) -> None:
        around, call = self.model.here.loop, node.value
        if around is None or not isinstance(call, cst.Call) or isinstance(
                call.func, (cst.Call, cst.Subscript)) or len(node.targets) != 1:
            return
        if self.qualified_name(call.func) not in SCALERS:
            return
        scaler, loop = dotted(node.targets[0].target), around.node
        path = self.model.path(node, loop)
        if any(isinstance(n, cst.If) and inner is not n.test for n, inner in zip(path, path[1:])):
            return  # created conditionally (lazily) inside the loop
        calls = [n for n in descendants(loop) if type(n) is cst.Call]
        if scaler is None or not any(
                type(c.func) is cst.Attribute and c.func.attr.value in _SCALER_METHODS
                and dotted(c.func.value) == scaler for c in calls) or any(map(self._optimizer, calls)):
            return
        found = self.model.site(node).alone(())
        parent = self.model.path(loop, around.function.node)[-2]
        if found is None or found[0] is not loop.body or not isinstance(
                parent, (cst.IndentedBlock, cst.Module)) or _used_names(call) & _bound_names(loop):
            self.report(call)
            return
        line = found[1]
        new_loop = loop.with_changes(body=without_statement(loop.body, line, keep_comments=False))
        block = parent.with_changes(body=[new_loop if s is loop else s for s in parent.body])
        # its own comments move with it; blank lines above it stay behind
        comments = [e for e in line.leading_lines if e.comment is not None]
        block = insert_before(block, new_loop, line.with_changes(leading_lines=comments))
        self.report(call, edits=[(parent, block)])

    def _optimizer(self, call: cst.Call) -> bool:
        """Whether `call` builds an optimizer: `torch.optim.<Class>(...)`."""
        qualified = self.qualified_name(call.func) or ""
        return qualified.startswith("torch.optim.") and qualified.rsplit(".", 1)[1][:1].isupper()
