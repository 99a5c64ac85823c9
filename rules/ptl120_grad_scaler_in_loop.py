"""PTL120 grad-scaler-in-loop."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.statements import insert_before, without_statement
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rules._training import BlockRule
from ptlint.analysis.walk import descendants

_SCALERS = frozenset({
    "torch.GradScaler",
    "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.cpu.amp.GradScaler",
    "torch.cpu.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.ShardedGradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
})
_SCALER_METHODS = ("scale", "step", "update", "unscale_")
_LOOP = (cst.For, cst.While)
# names a loop binds: its targets, assignments, `with ... as`, walrus, nested loop targets
_BINDERS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)


@dataclass
class _Context:
    """An enclosing loop or `if`, with the block that holds it."""

    node: cst.CSTNode
    parent: cst.IndentedBlock | cst.Module | None


@dataclass
class _Function:
    contexts: list[_Context] = field(default_factory=list)


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


class GradScalerInLoop(BlockRule):
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

    def __init__(self, context) -> None:
        super().__init__(context)
        self.functions: list[_Function] = [_Function()]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(_Function())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

    def _enter(self, node: cst.CSTNode) -> None:
        self.functions[-1].contexts.append(_Context(node, self.blocks[-1] if self.blocks else None))

    def _leave(self, node: cst.CSTNode) -> None:
        self.functions[-1].contexts.pop()

    def visit_For(self, node: cst.For) -> None:
        self._enter(node)

    def leave_For(self, node: cst.For) -> None:
        self._leave(node)

    def visit_While(self, node: cst.While) -> None:
        self._enter(node)

    def leave_While(self, node: cst.While) -> None:
        self._leave(node)

    def visit_If(self, node: cst.If) -> None:
        self._enter(node)

    def leave_If(self, node: cst.If) -> None:
        self._leave(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        contexts = self.functions[-1].contexts
        if not contexts or not isinstance(contexts[-1].node, _LOOP):
            return  # not in a loop, or created conditionally (lazily) inside it
        call = node.value
        if not isinstance(call, cst.Call) or isinstance(call.func, (cst.Call, cst.Subscript)):
            return
        if self.qualified_name(call.func) not in _SCALERS or len(node.targets) != 1:
            return
        scaler = dotted(node.targets[0].target)
        loop = contexts[-1].node
        if scaler is None or not self._uses(loop, scaler) or self._creates_optimizer(loop):
            return
        self._report(call, node, loop, contexts[-1].parent)

    def _uses(self, loop: cst.CSTNode, scaler: str) -> bool:
        for found in descendants(loop):
            if type(found) is not cst.Call or type(found.func) is not cst.Attribute:
                continue
            func = found.func
            if func.attr.value in _SCALER_METHODS and dotted(func.value) == scaler:
                return True
        return False

    def _creates_optimizer(self, loop: cst.CSTNode) -> bool:
        for found in descendants(loop):
            if type(found) is not cst.Call:
                continue
            qualified = self.qualified_name(found.func) or ""
            if qualified.startswith("torch.optim.") and qualified.rsplit(".", 1)[1][:1].isupper():
                return True
        return False

    def _report(self, call: cst.Call, assign: cst.Assign, loop, parent) -> None:
        line = self.line
        fixable = (
            line is not None and len(line.body) == 1 and line.body[0] is assign
            and parent is not None
            and isinstance(loop.body, cst.IndentedBlock)
            and any(s is line for s in loop.body.body)
            and not (_used_names(call) & _bound_names(loop))
        )
        if not fixable:
            self.report(call)
            return
        new_loop = loop.with_changes(body=without_statement(loop.body, line, keep_comments=False))
        block = parent.with_changes(body=[new_loop if s is loop else s for s in parent.body])
        # its own comments move with it; blank lines above it stay behind
        comments = [e for e in line.leading_lines if e.comment is not None]
        block = insert_before(block, new_loop, line.with_changes(leading_lines=comments))
        self.report(call, edits=[(parent, block)])
