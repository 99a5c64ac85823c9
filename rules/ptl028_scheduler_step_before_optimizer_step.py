"""PTL028 scheduler-step-before-optimizer-step."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.dataflow import block as block_of
from ptlint.analysis.dataflow import bound_in, last_name, statements, target_vars, vars_in
from ptlint.analysis.semantic import STEP, Site
from ptlint.analysis.walk import descendants
from ptlint.fixers.statements import move_after
from ptlint.model import Safety
from ptlint.rule import Rule

_LEAVES = (cst.Continue, cst.Break, cst.Return, cst.Raise)


class SchedulerStepBeforeOptimizerStep(Rule):
    """
    ## What it does
    Flags `scheduler.step()` (no arguments) written as a statement of a loop's
    body before the statement of that body that steps the optimizer, when no
    earlier statement of the body does: directly (`optimizer.step()`,
    `scaler.step(optimizer)`) or through a function of the file that does
    (`train(...)`, `self.train_epoch(...)`), as in the convention of torch
    before 1.1:

    ```python
    for epoch in range(epochs):
        scheduler.step()
        train(model, loader, optimizer)
    ```

    Also in the body of an `if`, a statement of the loop's body, whose test
    reads nothing the loop binds: a setting (`if args.sgdr: sgdr.step()`);
    and in any block of the loop, before the optimizer's step in that same
    block (`if (i + 1) % accumulate == 0: scheduler.step(); optimizer.step()`).
    A `scheduler.step()` inside any other `if` (`if epoch > 0:
    scheduler.step()`, which keeps the first value on purpose), one given an
    epoch or a metric (`scheduler.step(epoch)`,
    `ReduceLROnPlateau`'s `scheduler.step(val_loss)`) and one after a step in
    the same body are not flagged.

    ## Why is this bad?
    Since PyTorch 1.1 a scheduler's `step()` moves the learning rate to the
    value for the *next* step or epoch, and is meant to run after
    `optimizer.step()`. Called first, it skips the schedule's first value:
    every learning rate comes one step (or one epoch) early, a `StepLR`
    decays an epoch before its `step_size`, a warm-up starts past its first
    value. PyTorch warns once at run time ("Detected call of
    `lr_scheduler.step()` before `optimizer.step()`"), in a log nobody reads.

    ## Example
    ```python
    import torch

    def fit(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
        for epoch in range(epochs):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def fit(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    ```

    ## Fix safety
    Unsafe: the fix moves `scheduler.step()` (or its `if`, when the call is
    all the `if` holds and it has no `else`) to just after the last statement
    of the same body that steps the optimizer (comment lines directly above
    it move with it). Every learning rate then comes when the schedule says,
    which changes training. No fix is offered when a statement in between may
    leave the body early (`continue`, `break`, `return`, `raise`), since the
    moved call would then be skipped.

    ## References
    - [How to adjust the learning rate](https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate)
    """

    code = "PTL028"
    message = ("`{scheduler}.step()` before the optimizer's step in the same iteration: the "
               "schedule skips its first value and runs one step early")
    fix_title = "Move `{scheduler}.step()` after the optimizer's step"
    fix_safety = Safety.UNSAFE
    requires_text = ("step()",)
    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.schedules: list[Site] = []  # `x.step()` calls without arguments

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Attribute and node.func.attr.value == "step" and not node.args:
            self.schedules.append(self.model.site(node))

    def leave_Module(self, node: cst.Module) -> None:
        for site in self.schedules:
            loop, function = site.ctx.loop, site.ctx.function
            found = site.alone()
            receiver = site.node.func.value
            if loop is None or found is None or not (
                    self.model.kind_is(receiver, function, t.SCHEDULER)) or t.named_like(
                    receiver, t.OPTIMIZER):
                continue  # (a scheduler's `.step()` is never an optimizer step)
            if found[0] is not loop.node.body:
                if self._check(site, *found):  # before the step of its own block
                    continue
                found = self._under_a_setting(loop, found[1])  # `if args.sgdr: sgdr.step()`
            if found is not None:
                self._check(site, *found)

    def _under_a_setting(self, loop, line: cst.CSTNode):
        """(loop body, the `if`, whether a fix may move it) when `line` is in the
        body of an `if` that is a statement of the loop's body and whose test reads
        nothing the loop binds (`if args.sgdr:`, `if scheduler is not None:`; not
        `if epoch > 0:`, which keeps the first value on purpose). The `if` moves
        when `line` is all it holds."""
        node = loop.node
        path = self.model.path(line, node.body)
        statement = path[1] if len(path) == 4 else None  # body, `if`, its block, the line
        if not (type(statement) is cst.If and statement.body is path[2]):
            return None
        bound = bound_in(statements(block_of(node.body)))  # what the loop binds
        if type(node) is cst.For:
            bound.update(target_vars(node.target))
        if vars_in(statement.test) & bound:
            return None
        return node.body, statement, statement.orelse is None and len(path[2].body) == 1

    def _check(self, site: Site, owner: cst.IndentedBlock, line: cst.BaseStatement,
               movable: bool = True) -> bool:
        """Report `site` when a later statement of `owner` steps the optimizer and no
        earlier one does; whether it did."""
        model = self.model
        steps = {id(s.node) for s in site.ctx.function.all_sites()
                 if s.kind == STEP and model.stepped(s) is not None}
        helpers = model.helpers(STEP)  # `train(...)`, `self.train_epoch(...)`: they step

        def steps_in(statement: cst.CSTNode) -> bool:
            return any(id(n) in steps or type(n) is cst.Call and (
                type(n.func) is cst.Name or type(n.func) is cst.Attribute and last_name(
                    n.func.value) in ("self", "cls")) and last_name(n.func) in helpers
                for n in descendants(statement))

        body = list(owner.body)
        at = body.index(line)
        stepped = [i for i, statement in enumerate(body) if steps_in(statement)]
        if not stepped or stepped[0] <= at:
            return False  # no step in the body after it, or one before it (or in its `if`)
        last = stepped[-1]
        scheduler = cst.Module([]).code_for_node(site.node.func.value)
        leaves = any(isinstance(n, _LEAVES) for statement in body[at + 1:last + 1]
                     for n in descendants(statement))
        edits = [(owner, move_after(owner, line, body[last]))] if movable and not leaves else []
        self.report(site.node, message=self.message.format(scheduler=scheduler), edits=edits,
                    fix_title=self.fix_title.format(scheduler=scheduler))
        return True
