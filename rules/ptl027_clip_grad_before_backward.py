"""PTL027 clip-grad-before-backward."""
from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ptlint.analysis.dataflow import bound_in, last_name, statements, vars_in
from ptlint.analysis.names import dotted
from ptlint.analysis.semantic import BACKWARD, STEP, Function, Site
from ptlint.analysis.training import CLIPS, scaled_backward
from ptlint.fixers.statements import move_after
from ptlint.model import Safety
from ptlint.rule import Rule

# `accelerator.clip_grad_norm_(...)`, FSDP's `model.clip_grad_norm_(...)`
_CLIP_METHODS = frozenset({"clip_grad_norm_", "clip_grad_value_"})


class _State(NamedTuple):
    """What holds on one path since the last optimizer step."""

    early: tuple[Site, ...] = ()  # clips that ran before any backward
    backward: bool = False  # a backward has run
    clipped: bool = False  # a clip ran after a backward


def _join(*states: _State) -> _State:
    """Paths joining: a clip that ran early on one of them ran early whenever it
    ran (`if args.clip: clip(...)`); a backward counts when every path ran one,
    a late clip when any did."""
    early = tuple({id(s): s for state in states for s in state.early}.values())
    return _State(early, all(s.backward for s in states), any(s.clipped for s in states))


class ClipGradBeforeBackward(Rule):
    """
    ## What it does
    Flags gradient clipping (`torch.nn.utils.clip_grad_norm_`,
    `clip_grad_value_`, or a `clip_grad_norm_` method such as Accelerate's)
    that runs after the last optimizer step and before the `.backward()`
    whose gradients the next step takes, on every path from the clip to that
    step, with no clipping between that backward and the step.

    ## Why is this bad?
    Clipping rescales the gradients that are there when it runs. Before the
    backward those are the zeros (or `None`) that `zero_grad()` left, or the
    last step's, so it does nothing useful; the backward then writes the new
    gradients and the step applies them unclipped. Training runs without the
    clipping it was configured with, and a spike in the loss that the clip
    was meant to absorb goes straight into the weights. Nothing fails.

    A clip after another backward in the same step (`loss_a.backward()`,
    clip, `loss_b.backward()`) is not flagged, nor one in a function that
    does not itself run both the backward and the step.

    ## Example
    ```python
    import torch

    def train(model, optimizer, loader, clip):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            loss.backward()
            optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def train(model, optimizer, loader, clip):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
    ```

    ## Fix safety
    Unsafe. The fix moves the clip's statement (with an `if` around it that
    holds nothing else, as in `if args.clip > 0: clip_grad_norm_(...)`) to
    just before the optimizer step in the same block; comment lines directly
    above it move with it. The clip then acts on the gradients the step
    takes, which is its intent, but it changes what training computes, so it
    is applied only with `--unsafe-fixes` (or `extend-safe-fixes`). No fix is
    offered when the clip and the step are not in the same block, when a
    name the moved statement reads or binds is bound or read in between, or
    when the function backpropagates through a `GradScaler` (there the clip
    also needs `scaler.unscale_(optimizer)` first: PTL020).

    ## References
    - [`torch.nn.utils.clip_grad_norm_`](https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html)
    - [AMP examples: gradient clipping](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping)
    """

    code = "PTL027"
    message = ("`{clip}` before `.backward()`: it clips the old gradients, and the optimizer "
               "step takes the new ones unclipped")
    fix_title = "Move the clipping to just before the optimizer step"
    fix_safety = Safety.UNSAFE
    requires_text = ("clip_grad",)
    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.clips: list[Site] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if name.startswith("clip_grad") and (
                type(node.func) is cst.Attribute and name in _CLIP_METHODS
                or self.qualified_name(node.func) in CLIPS):
            self.clips.append(self.model.site(node))

    def leave_Module(self, node: cst.Module) -> None:
        by_function: dict[int, Function] = {}
        for site in self.clips:
            by_function.setdefault(id(site.ctx.function), site.ctx.function)
        for function in by_function.values():
            if isinstance(function.node, (cst.Module, cst.FunctionDef)):
                self._scan(function)

    def _scan(self, function: Function) -> None:
        events: dict[int, list[tuple[str, Site]]] = {}
        for site in function.all_sites():
            kind = self._event(site)
            if kind is not None:
                events.setdefault(id(site.line), []).append((kind, site))
        for site in self.clips:
            if site.ctx.function is function:
                events.setdefault(id(site.line), []).append(("clip", site))
        for found in events.values():
            found.sort(key=lambda event: event[1].order)
        reported: set[int] = set()

        def apply(holder: cst.CSTNode, state: _State) -> _State:
            for kind, site in events.get(id(holder), ()):
                if kind == "backward":
                    state = state._replace(backward=True)
                elif kind == "clip":
                    state = state._replace(clipped=True) if state.backward else state._replace(
                        early=(*state.early, site))
                else:  # an optimizer step: "step", or "closure" (it runs its own backward)
                    if kind == "step" and state.backward and not state.clipped:
                        for clip in state.early:
                            if id(clip.node) not in reported:
                                reported.add(id(clip.node))
                                self._report(function, clip, site)
                    state = _State()
            return state

        self.model.scan(function.node.body, _State(), apply, _join)

    def _event(self, site: Site) -> str | None:
        if self.model.runs_backward(site):
            return "backward"  # incl. `self.manual_backward(loss)`, `accelerator.backward(loss)`
        stepped = self.model.stepped(site) if site.kind == STEP else None
        if stepped is not None:
            return "closure" if stepped[1] else "step"
        return None

    # -- report and fix ----------------------------------------------------
    def _report(self, function: Function, clip: Site, step: Site) -> None:
        message = self.message.format(clip=dotted(clip.node.func) or "clip_grad_norm_")
        self.report(clip.node, message=message, edits=self._fix(function, clip, step))

    def _fix(self, function: Function, clip: Site, step: Site) -> list:
        found = step.alone()
        if found is None or any(scaled_backward(s.node) for s in function.all_sites()
                                if s.kind == BACKWARD):
            return []
        owner, line = found
        path = self.model.path(clip.node, owner)
        body = list(owner.body)
        moved = path[1] if len(path) > 2 else None
        if moved is None or moved not in body or not _clip_only(moved, clip.node):
            return []
        at, at_step = body.index(moved), body.index(line)
        if not at < at_step - 1:
            return []
        between = body[at + 1:at_step]
        if bound_in(statements(between)) & vars_in(moved) or bound_in(
                statements([moved])) & set().union(*map(vars_in, between)):
            return []  # e.g. the `if`'s test rebound, or `norm = clip(...)` read, in between
        return [(owner, move_after(owner, moved, body[at_step - 1]))]


def _clip_only(statement: cst.BaseStatement, clip: cst.Call) -> bool:
    """Whether `statement` does nothing but the clip: `clip(...)`, `norm = clip(...)`,
    or an `if` without `else` around one such line."""
    if type(statement) is cst.If and statement.orelse is None and type(
            statement.body) is cst.IndentedBlock and len(statement.body.body) == 1:
        statement = statement.body.body[0]
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return False
    small = statement.body[0]
    return type(small) in (cst.Expr, cst.Assign, cst.AnnAssign) and small.value is clip
