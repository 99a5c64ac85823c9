"""PTL020 clip-grad-without-unscale."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import last_name
from ptlint.analysis.names import dotted
from ptlint.analysis.semantic import BACKWARD, STEP, Function, Site
from ptlint.analysis.training import CLIPS, scaled_backward
from ptlint.fixers.statements import insert_before, statement
from ptlint.model import Safety
from ptlint.rule import Rule


class ClipGradWithoutUnscale(Rule):
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

    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.calls: list[tuple[Site, str]] = []  # unscaling calls and clips, where they are

    def visit_Call(self, node: cst.Call) -> None:
        name = last_name(node.func)
        if "unscale" in name.lower():  # `S.unscale_(optimizer)`; anything else unscales all
            one = name == "unscale_" and isinstance(node.func, cst.Attribute) and dotted(node.func.value)
            self.calls.append((self.model.site(node), "unscale_" if one else "unscale"))
        elif name.startswith("clip_grad") and self.qualified_name(node.func) in CLIPS:
            self.calls.append((self.model.site(node), "clip"))

    def leave_Module(self, node: cst.Module) -> None:
        calls: dict[Function, list[tuple[Site, str]]] = {}
        for site, what in self.calls:
            calls.setdefault(site.ctx.function, []).append((site, what))
        for function, found in calls.items():
            if any(what == "clip" for _, what in found):
                self._check(function, found)

    def _check(self, function: Function, found: list[tuple[Site, str]]) -> None:
        sites = function.all_sites()
        scalers = {scaled_backward(s.node) for s in sites if s.kind == BACKWARD} - {None}
        steps: dict[str, set[str]] = {}  # scaler -> optimizers it steps
        events = list(found)
        for site in sites:
            if site.kind == BACKWARD and scaled_backward(site.node):
                events.append((site, "scale"))
            elif site.kind == STEP and dotted(site.node.func.value) in scalers:
                events.append((site, "step"))
                args = [a for a in site.node.args if not a.keyword and not a.star]
                optimizer = dotted(args[0].value) if len(args) == 1 else None
                steps.setdefault(dotted(site.node.func.value), set()).add(optimizer or "")
        at: dict[int, list[tuple[Site, str]]] = {}
        for site, what in sorted(events, key=lambda e: e[0].order):
            at.setdefault(id(site.line), []).append((site, what))
        unscaled = {dotted(s.node.func.value) for s, what in found if what == "unscale_"}
        helper = any(what == "unscale" and last_name(s.node.func) != "unscale_" for s, what in found)
        clips: dict[int, tuple[Site, str]] = {}  # the first scaler pending at each clip

        def apply(holder: cst.CSTNode, pending: frozenset) -> frozenset:
            for site, what in at.get(id(holder), ()):
                if what == "scale":
                    pending |= {scaled_backward(site.node)}
                elif what in ("step", "unscale_"):
                    pending -= {dotted(site.node.func.value)}
                elif what == "unscale":
                    pending = frozenset()
                elif what == "clip" and pending:
                    clips.setdefault(id(site.node), (site, min(pending)))
            return pending

        if not isinstance(function.node, cst.Lambda):
            self.model.scan(function.node.body, frozenset(), apply,
                            lambda *states: frozenset().union(*states))
        for site, scaler in clips.values():
            optimizers = steps.get(scaler, set())
            fixable = len(optimizers) == 1 and "" not in optimizers and not (
                scaler in unscaled or helper)
            self._report(site, scaler, next(iter(optimizers)) if fixable else None)

    def _report(self, site: Site, scaler: str, optimizer: str | None) -> None:
        call = site.node
        message = self.message.format(clip=dotted(call.func) or "clip_grad_norm_", scaler=scaler)
        found = site.alone((cst.Expr, cst.Assign, cst.AnnAssign))
        if optimizer is None or found is None or not isinstance(found[0], cst.IndentedBlock):
            found = None  # no fix
        self.report(call, message=message, edits=() if found is None else [(found[0], insert_before(
            *found, statement(f"{scaler}.unscale_({optimizer})")))],
            fix_title=self.fix_title.format(scaler=scaler, optimizer=optimizer))
