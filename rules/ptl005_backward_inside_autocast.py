"""PTL005 backward-inside-autocast."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.statements import hoist_out_of_with
from ptlint.model import Safety
from ptlint.rules._training import StatementRule, is_backward, owner_of

# autocast(...) callables whose first positional parameter is `enabled`
_ENABLED_FIRST = (
    "torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast",
    "torch.cpu.amp.autocast", "torch.cpu.amp.autocast_mode.autocast",
)
# ... and those that take (device_type, dtype, enabled, ...)
_DEVICE_FIRST = ("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast")
# Statement calls that do the same thing in or out of autocast.
_UPDATE_METHODS = frozenset({"backward", "step", "update", "zero_grad", "unscale_"})


class BackwardInsideAutocast(StatementRule):
    """
    ## What it does
    Flags `.backward()` (including `scaler.scale(loss).backward()`) called
    inside a `with` block of `torch.autocast(...)`, `torch.amp.autocast(...)`,
    `torch.cuda.amp.autocast(...)` or `torch.cpu.amp.autocast(...)`, through
    any import alias.

    ## Why is this bad?
    Autocast should wrap only the forward pass and the loss computation. The
    PyTorch AMP documentation says backward passes under autocast are not
    recommended: backward ops already run in the dtype autocast chose for the
    matching forward ops, so keeping autocast on during backward buys
    nothing, and everything else in the block (optimizer steps, metrics)
    also runs under autocast, where it may silently change precision.

    Autocast with a literal `enabled=False`, and functions defined inside the
    block (they run later), are not flagged.

    ## Example
    ```python
    import torch

    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
    ```

    Use instead:
    ```python
    import torch

    with torch.autocast("cuda", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    ```

    ## Fix safety
    Safe when the backward statement sits directly in the body of a
    single-item `with` and every statement from it to the end of the body
    is a gradient update call (`.backward()`, `.step()`, `.update()`,
    `.zero_grad()`, `.unscale_()`): those statements are moved out, just
    after the block, and an emptied `with` is dropped. The gradients are the
    same, because backward ops run in the dtype of their forward ops either
    way. When other statements would move out with the backward (they would
    then run in full precision), the fix is unsafe. Backward calls nested
    deeper (in an `if`, a loop, a one-line body) or in a `with` of several
    items are reported without a fix.

    ## References
    - [Automatic mixed precision: autocast](https://pytorch.org/docs/stable/amp.html#autocasting)
    - [AMP examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    """

    code = "PTL005"
    message = "`.backward()` inside an autocast block: autocast should wrap only the forward pass"
    fix_title = "Move the backward pass out of the autocast block"
    fix_safety = Safety.SAFE
    requires_text = ("autocast",)

    def __init__(self, context) -> None:
        super().__init__(context)
        # per open `with`: (node, autocast state or None when not autocast); a
        # def or lambda pushes a barrier (None node)
        self.contexts: list[tuple[cst.With | None, bool | None]] = []

    def visit_With(self, node: cst.With) -> None:
        self._enter(node)
        state = None
        for item in node.items:
            enabled = self._autocast(item.item)
            if enabled is not None:
                state = enabled
        self.contexts.append((node, state))

    def leave_With(self, original_node: cst.With) -> None:
        self.contexts.pop()
        self._leave(original_node)

    def _barrier(self, node: cst.CSTNode) -> None:
        self.contexts.append((None, None))

    def _unbarrier(self, original_node: cst.CSTNode) -> None:
        self.contexts.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node)
        self._barrier(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._unbarrier(original_node)
        self._leave(original_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter(node)
        self._barrier(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._unbarrier(original_node)
        self._leave(original_node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._barrier(node)

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._unbarrier(original_node)

    def _autocast(self, node: cst.BaseExpression) -> bool | None:
        """None when `node` is no autocast call, else whether it may be enabled."""
        if not isinstance(node, cst.Call):
            return None
        name = self.qualified_name(node.func)
        if name in _ENABLED_FIRST:
            at = 0
        elif name in _DEVICE_FIRST:
            at = 2
        else:
            return None
        positional = [a for a in node.args if a.keyword is None and not a.star]
        enabled = next((a.value for a in node.args
                        if a.keyword is not None and a.keyword.value == "enabled"), None)
        if enabled is None and len(positional) > at:
            enabled = positional[at].value
        return not (isinstance(enabled, cst.Name) and enabled.value == "False")

    def visit_Call(self, node: cst.Call) -> None:
        if not is_backward(self, node):
            return
        for with_node, state in reversed(self.contexts):
            if with_node is None:
                return  # inside a def or lambda: runs later
            if state is not None:
                if state:
                    self._report(node, with_node)
                return

    def _report(self, call: cst.Call, with_node: cst.With) -> None:
        path = self.path
        at = next(i for i, n in enumerate(path) if n is with_node)
        line = path[-1]
        owner = owner_of(path, with_node)
        direct = (
            len(path) == at + 3
            and isinstance(path[at + 1], cst.IndentedBlock)
            and isinstance(line, cst.SimpleStatementLine)
            and len(with_node.items) == 1
            and owner is not None
            and not with_node.asynchronous
        )
        if not direct:
            self.report(call)
            return
        body = list(with_node.body.body)
        moved = body[next(i for i, s in enumerate(body) if s is line):]
        if len(moved) == len(body) and with_node.items[0].asname is not None:
            self.report(call)  # dropping the `with` would drop its `as` name
            return
        safe = all(_updates_only(s) for s in moved)
        edit = self.block_edit(path, owner, hoist_out_of_with(owner, with_node, line))
        if edit is None:
            self.report(call)
            return
        self.report(call, edits=[edit], safety=Safety.SAFE if safe else Safety.UNSAFE)


def _updates_only(statement: cst.BaseStatement) -> bool:
    """A line of calls like `loss.backward()`, `scaler.step(opt)`, `scaler.update()`."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Pass):
            continue
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return False
        func = small.value.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _UPDATE_METHODS):
            return False
    return True
