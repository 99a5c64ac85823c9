"""PTL020 clip-grad-without-unscale."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.statements import insert_before, statement
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rules._training import BlockRule

_CLIPS = frozenset({
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_",
    "torch.nn.utils.clip_grad_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm",
    "torch.nn.utils.clip_grads_with_norm_",
    "torch.nn.utils.clip_grad.clip_grads_with_norm_",
})


@dataclass
class _Clip:
    call: cst.Call
    scaler: str
    line: cst.SimpleStatementLine | None  # the statement to insert before, when it is one
    block: cst.IndentedBlock | None


@dataclass
class _Branch:
    node: cst.If
    before: set[str]
    body_end: set[str] | None = None


@dataclass
class _Frame:
    """What one function body (or the module) has seen so far, in source order."""

    pending: set[str] = field(default_factory=set)  # scalers whose grads are still scaled
    scalers: set[str] = field(default_factory=set)  # every `S` of `S.scale(loss).backward()`
    branches: list[_Branch] = field(default_factory=list)
    clips: list[_Clip] = field(default_factory=list)
    steps: dict[str, set[str]] = field(default_factory=dict)  # scaler -> optimizers stepped
    unscales: set[str] = field(default_factory=set)  # scalers unscaled anywhere here
    unscale_like: bool = False  # a call that may unscale through a helper


def _scale_backward(node: cst.Call) -> str | None:
    """`S` for `S.scale(loss).backward(...)`."""
    func = node.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
        return None
    inner = func.value
    if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value == "scale"):
        return None
    return dotted(inner.func.value)


class ClipGradWithoutUnscale(BlockRule):
    """
    ## What it does
    Flags `torch.nn.utils.clip_grad_norm_(...)` / `clip_grad_value_(...)` that
    run after `scaler.scale(loss).backward()` with no `scaler.unscale_(optimizer)`
    in between.

    ## Why is this bad?
    With a `GradScaler`, the gradients left by `scaler.scale(loss).backward()`
    are multiplied by the current scale (65536 at the start). Clipping them
    compares the scaled norm with `max_norm`, so the clip is far tighter than
    intended and changes with the scale, and `scaler.step()` then unscales
    the already-clipped gradients: the update is tiny. PyTorch's AMP examples
    call `scaler.unscale_(optimizer)` right before clipping.

    The check follows the function in source order and keeps `if`/`else`
    branches apart; a call to any `...unscale...` helper in between also
    counts as unscaling.

    ## Example
    ```python
    import torch

    def step(model, optimizer, scaler, loss):
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    Use instead:
    ```python
    import torch

    def step(model, optimizer, scaler, loss):
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Unsafe: the fix inserts `scaler.unscale_(optimizer)` before the clip, using
    the optimizer the same function passes to `scaler.step()`. Clipping then
    works as intended, which changes training. It is offered only when the
    function steps that scaler with a single optimizer and never calls its
    `unscale_` (a second `unscale_` before `update()` raises), and only for a
    clip that is a statement of its own inside a block.

    ## References
    - [AMP examples: gradient clipping](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping)
    """

    code = "PTL020"
    message = ("`{clip}` after `{scaler}.scale(loss).backward()` without "
               "`{scaler}.unscale_(optimizer)`: it clips the scaled gradients")
    fix_title = "Call `{scaler}.unscale_({optimizer})` before clipping"
    fix_safety = Safety.UNSAFE
    requires_text = ("clip_grad",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.frames: list[_Frame] = [_Frame()]
        self.orelse: dict[int, _Branch] = {}  # id of an `if`'s else part -> its branch

    # -- where we are (BlockRule keeps the block and the line) ----------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.frames.append(_Frame())

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._finish(self.frames.pop())

    def leave_Module(self, node: cst.Module) -> None:
        self._finish(self.frames.pop())

    # -- branches: each starts from the state before the `if` --------------------------
    def visit_If(self, node: cst.If) -> None:
        self._start_orelse(node)
        frame = self.frames[-1]
        branch = _Branch(node, set(frame.pending))
        frame.branches.append(branch)
        if node.orelse is not None:
            self.orelse[id(node.orelse)] = branch

    def visit_Else(self, node: cst.Else) -> None:
        self._start_orelse(node)

    def _start_orelse(self, node: cst.CSTNode) -> None:
        branch = self.orelse.pop(id(node), None)
        if branch is not None:
            frame = self.frames[-1]
            branch.body_end = set(frame.pending)
            frame.pending = set(branch.before)

    def leave_If(self, node: cst.If) -> None:
        frame = self.frames[-1]
        branch = frame.branches.pop()
        # pending after the `if` when pending at the end of either path
        frame.pending |= branch.before if branch.body_end is None else branch.body_end

    # -- events ---------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        frame = self.frames[-1]
        scaler = _scale_backward(node)
        if scaler is not None:
            frame.pending.add(scaler)
            frame.scalers.add(scaler)
            return
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = dotted(func.value)
            if method == "unscale_" and receiver is not None:
                frame.pending.discard(receiver)
                frame.unscales.add(receiver)
                return
            if method == "step" and receiver in frame.scalers:
                frame.pending.discard(receiver)
                args = [a for a in node.args if not a.keyword and not a.star]
                optimizer = dotted(args[0].value) if len(args) == 1 else None
                frame.steps.setdefault(receiver, set()).add(optimizer or "")
                return
        name = func.attr.value if isinstance(func, cst.Attribute) else \
            func.value if isinstance(func, cst.Name) else ""
        if "unscale" in name.lower():  # a helper that unscales (e.g. `unscale_gradients`)
            frame.pending.clear()
            frame.unscale_like = True
            return
        if not frame.pending or isinstance(func, (cst.Call, cst.Subscript)):
            return
        if self.qualified_name(func) not in _CLIPS:
            return
        line = self.line
        direct = (
            line is not None and len(line.body) == 1
            and isinstance(line.body[0], (cst.Expr, cst.Assign, cst.AnnAssign))
            and line.body[0].value is node
            and isinstance(self.blocks[-1], cst.IndentedBlock)
        )
        for scaler in sorted(frame.pending):
            frame.clips.append(_Clip(node, scaler, line if direct else None,
                                     self.blocks[-1] if direct else None))

    def _finish(self, frame: _Frame) -> None:
        reported: set[int] = set()
        for clip in frame.clips:
            if id(clip.call) in reported:
                continue
            reported.add(id(clip.call))
            name = dotted(clip.call.func) or "clip_grad_norm_"
            message = self.message.format(clip=name, scaler=clip.scaler)
            optimizers = frame.steps.get(clip.scaler, set())
            if (clip.line is None or clip.block is None or len(optimizers) != 1
                    or "" in optimizers or clip.scaler in frame.unscales
                    or frame.unscale_like):
                self.report(clip.call, message=message)
                continue
            optimizer = next(iter(optimizers))
            new_block = insert_before(clip.block, clip.line,
                                      statement(f"{clip.scaler}.unscale_({optimizer})"))
            self.report(clip.call, message=message, edits=[(clip.block, new_block)],
                        fix_title=self.fix_title.format(scaler=clip.scaler, optimizer=optimizer))
