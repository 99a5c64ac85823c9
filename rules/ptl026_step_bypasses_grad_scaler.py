"""PTL026 step-bypasses-grad-scaler."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import calls_in, var
from ptlint.analysis.semantic import BACKWARD, STEP, Function, Site
from ptlint.analysis.training import scaled_backward
from ptlint.fixers.statements import insert_after, simple_statement
from ptlint.model import Safety
from ptlint.rule import Rule


class StepBypassesGradScaler(Rule):
    """
    ## What it does
    Flags `optimizer.step()` called directly in a function that backpropagates
    through a `GradScaler` (`scaler.scale(loss).backward()`) and never calls
    `scaler.step(...)` or `scaler.unscale_(...)`.

    ## Why is this bad?
    `scaler.scale(loss).backward()` leaves gradients multiplied by the scale
    (65536 at the start). `scaler.step(optimizer)` divides them back and skips
    the step when they overflowed; `optimizer.step()` applies them as they
    are. With SGD every update is thousands of times too large and training
    diverges; with Adam, which mostly cancels the factor, the steps taken
    with `inf`/`NaN` gradients still corrupt the weights. And since no step
    records an overflow, `scaler.update()` never lowers the scale (it raises
    "No inf checks were recorded" when called).

    ## Example
    ```python
    import torch

    def train(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def train(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    ```

    ## Fix safety
    Unsafe: the fix writes `scaler.step(optimizer)`, and `scaler.update()`
    after it when the function never calls it, so the steps see the true
    gradients and overflowing steps are skipped: training changes, as it
    should. It is offered when the step is a statement of its own and the
    function scales with one scaler.

    ## References
    - [AMP examples: typical mixed precision training](https://pytorch.org/docs/stable/notes/amp_examples.html#typical-mixed-precision-training)
    - [`torch.amp.GradScaler.step`](https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler.step)
    """

    code = "PTL026"
    message = ("`optimizer.step()` after `scaler.scale(loss).backward()`: it applies the scaled "
               "gradients; call `scaler.step(optimizer)`")
    fix_title = "Step through the scaler"
    fix_safety = Safety.UNSAFE
    requires_text = ("scale(",)
    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        for function in self.model.functions:
            sites = function.all_sites()
            scalers = {scaled_backward(s.node) for s in sites if s.kind == BACKWARD} - {None}
            calls = function.every("calls")
            if not scalers or "unscale_" in calls or any(
                    s.kind == STEP and var(s.node.func.value) in scalers for s in sites):
                continue  # no scaler, or it steps (maybe on another path) or unscales
            for site in sites:
                stepped = self.model.stepped(site) if site.kind == STEP else None
                if stepped is not None and stepped[0] is site.node.func.value and not stepped[1]:
                    self._report(function, site, scalers)

    def _report(self, function: Function, site: Site, scalers: set[str]) -> None:
        call, found = site.node, site.alone()
        scaler, optimizer = min(scalers), cst.Module([]).code_for_node(call.func.value)
        if len(scalers) > 1 or found is None:
            self.report(call)
            return
        owner, line = found
        stepped = line.with_changes(body=[cst.Expr(cst.parse_expression(
            f"{scaler}.step({optimizer})"))])
        block = owner.with_changes(body=[stepped if s is line else s for s in owner.body])
        if not any(var(c.func) == f"{scaler}.update" for kind, node, _ in function.events
                   if kind == "small" for c in calls_in(node)):
            block = insert_after(block, stepped, simple_statement(f"{scaler}.update()"))
        self.report(call, edits=[(owner, block)])
