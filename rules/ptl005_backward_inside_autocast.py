"""PTL005 backward-inside-autocast."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import method_name
from ptlint.analysis.semantic import Site
from ptlint.fixers.statements import hoist_out_of_with
from ptlint.model import Safety
from ptlint.rule import Rule

# Statement calls that do the same thing in or out of autocast.
_UPDATE_METHODS = frozenset({"backward", "step", "update", "zero_grad", "unscale_"})


class BackwardInsideAutocast(Rule):
    """
    ## What it does
    Flags `.backward()` (including `scaler.scale(loss).backward()`) called
    inside a `with` block of `torch.autocast(...)`, `torch.amp.autocast(...)`,
    `torch.cuda.amp.autocast(...)` or `torch.cpu.amp.autocast(...)`, through
    any import alias, also when the context is held in a variable or an
    attribute (`ctx = torch.autocast(...)`, `ctx = nullcontext() if cpu else
    torch.autocast(...)`, `self.autocast = partial(torch.autocast, ...)`,
    then `with ctx:` or `with self.autocast():`), and in a function decorated
    with autocast.

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

    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        for function in self.model.functions:
            for site in function.all_sites():
                region = site.ctx.autocast if self.model.is_backward(site) else None
                if region is not None and region[1] is not False:
                    self._report(site, region[0])

    def _report(self, site: Site, region: cst.CSTNode) -> None:
        call = site.node
        inner = self.model.path(call, region)
        outer = self.model.path(region, site.ctx.function.node)
        if not (isinstance(region, cst.With) and len(region.items) == 1
                and not region.asynchronous and len(inner) > 2
                and isinstance(inner[1], cst.IndentedBlock)
                and isinstance(inner[2], cst.SimpleStatementLine)
                and len(outer) > 1 and isinstance(outer[-2], (cst.IndentedBlock, cst.Module))):
            self.report(call)  # not the direct body of a plain `with`
            return
        line, owner = inner[2], outer[-2]
        body = list(region.body.body)
        moved = body[body.index(line):]
        if len(moved) == len(body) and region.items[0].asname is not None:
            self.report(call)  # dropping the `with` would drop its `as` name
            return
        safe = all(_updates_only(s) for s in moved)
        self.report(call, edits=[(owner, hoist_out_of_with(owner, region, line))],
                    safety=Safety.SAFE if safe else Safety.UNSAFE)


def _updates_only(statement: cst.BaseStatement) -> bool:
    """A line of calls like `loss.backward()`, `scaler.step(opt)`, `scaler.update()`."""
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, cst.Pass) or (
            isinstance(small, cst.Expr) and method_name(small.value) in _UPDATE_METHODS)
        for small in statement.body)
