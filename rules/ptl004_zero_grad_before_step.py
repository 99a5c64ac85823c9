"""PTL004 zero-grad-before-step."""
from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ptlint.analysis.dataflow import last_name, method_name, var
from ptlint.analysis.semantic import GRAD, STEP, ZERO, Function, SemanticModel, Site
from ptlint.analysis.walk import descendants
from ptlint.fixers.statements import move_after
from ptlint.model import Safety
from ptlint.rule import Rule


class _State(NamedTuple):
    """What holds on one path through the code."""

    backward: bool  # a backward has run
    pending: tuple[Site, ...]  # zero_grad() calls after it, before any step
    spent: frozenset[str] = frozenset()  # what steps since it took its gradients (and models)


def _join(*states: _State) -> _State:
    """Paths joining: what holds on every one of them. A `zero_grad()` stays
    pending only if it is pending on all of them, so one in a branch of its
    own (`if not finite: optimizer.zero_grad()`, a deliberate skipped step)
    is not reported."""
    first, *rest = states
    pending = tuple(z for z in first.pending
                    if all(any(z is p for p in other.pending) for other in rest))
    return _State(all(s.backward for s in states), pending,
                  frozenset().union(*(s.spent for s in states)))


class ZeroGradBeforeStep(Rule):
    """
    ## What it does
    Flags `zero_grad()` that runs after `.backward()` and before the
    optimizer step on the same path, with no other backward in between on
    any path from one to the other. A `zero_grad()` of an optimizer (or of
    its model) that has already stepped since that backward clears nothing
    its step needs and is not flagged.

    ## Why is this bad?
    `zero_grad()` clears the gradients the backward pass just computed, so
    the step that follows sees zeros (or `None`) and the parameters never
    change: the model does not learn, and nothing fails. A classic form is
    gradient accumulation with AMP, where `optimizer.zero_grad()` is put in
    the `if` branch just before `scaler.step(optimizer)`; there, since
    `zero_grad()` sets gradients to `None` by default, an enabled
    `GradScaler` fails with "No inf checks were recorded for this
    optimizer".

    Gradients written back by hand between the two (`p.grad = g`,
    `p.grad.copy_(g)`) count as a fresh backward.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y) / accumulation_steps
        scaler.scale(loss).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.zero_grad()
            scaler.step(optimizer)
            scaler.update()
    ```

    Use instead:
    ```python
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y) / accumulation_steps
        scaler.scale(loss).backward()
        if (i + 1) % accumulation_steps == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    ```

    The rule matches the `zero_grad()` to the step of the same optimizer
    (or of an optimizer built from that model's `.parameters()`), so
    clearing another model's gradients between a backward and a step, as
    GAN code does, is not flagged.

    ## Fix safety
    Unsafe. The fix moves the `zero_grad()` statement to just after the
    step, or after `scaler.update()` when that follows, in the same block;
    comment lines directly above it move with it. Gradients are still
    cleared once on the same path and before the next backward, so nothing
    else about the loop changes, but the step now sees the gradients: the
    parameters start to change. That is the intent of the code and the point
    of the fix, yet it changes what the program computes, and a fix that
    changes training results is never applied without `--unsafe-fixes`
    here. If you want it applied by `--fix`, add `PTL004` to
    `extend-safe-fixes`. No fix is offered when the `zero_grad()` and the
    step are not statements of the same block.

    ## References
    - [AMP examples: gradient accumulation](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
    - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    """

    code = "PTL004"
    message = ("`zero_grad()` between `.backward()` and the optimizer step clears the gradients "
               "the step needs: the parameters never change")
    fix_title = "Move `zero_grad()` after the optimizer step"
    fix_safety = Safety.UNSAFE
    requires_text = ("zero_grad",)

    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        self.reported: set[int] = set()
        for function in self.model.functions:
            if isinstance(function.node, (cst.Module, cst.FunctionDef)):
                self._scan(function)

    def _scan(self, function: Function) -> None:
        events: dict[int, list[tuple[str, Site]]] = {}
        for site in function.all_sites():
            kind = _event(site)
            if kind is not None:
                events.setdefault(id(site.line), []).append((kind, site))
        if not any(kind == "zero" for found in events.values() for kind, _ in found):
            return

        def apply(holder: cst.CSTNode, state: _State) -> _State:
            for kind, site in events.get(id(holder), ()):
                stepped = self.model.stepped(site) if kind == "step" else None
                if kind == "backward" or (stepped is not None and stepped[1]):
                    state = _State(True, ())  # a closure runs its own backward
                elif kind == "zero" and state.backward and var(
                        site.node.func.value) not in state.spent:
                    state = _State(True, (*state.pending, site), state.spent)
                elif stepped is not None:
                    clearing = self._clearing(stepped[0])
                    cleared = [z for z in state.pending if var(z.node.func.value) in clearing]
                    for zero in cleared:
                        self._report(zero, site, events)
                    # a step took the gradients: clearing them for it next is no mistake
                    state = _State(state.backward, tuple(
                        z for z in state.pending if z not in cleared), state.spent | clearing)
            return state

        self.model.scan(function.node.body, _State(False, ()), apply, _join)

    def _clearing(self, optimizer: cst.BaseExpression) -> frozenset[str]:
        """The names whose `zero_grad()` clears the gradients `optimizer` steps
        with: the optimizer's, and its model's."""
        stepped = var(optimizer)
        return frozenset(k for k in (stepped, self.model.bindings.models.get(stepped))
                         if k is not None)

    # -- report and fix ----------------------------------------------------
    def _report(self, zero: Site, step: Site, events: dict) -> None:
        if id(zero.node) in self.reported:
            return
        self.reported.add(id(zero.node))
        found, statement, edits = zero.alone(), step.line, ()
        if found is not None and isinstance(statement, cst.SimpleStatementLine) and (
                statement in found[0].body):
            owner, line = found
            body = list(owner.body)
            at_zero, at_step = body.index(line), body.index(statement)
            # no fix past a backward on some path in between: that would change more than the bug
            if at_zero < at_step and not any(
                    kind == "backward" for s in body[at_zero + 1:at_step]
                    for n in descendants(s) for kind, _ in events.get(id(n), ())):
                anchor = self._after_update(body, at_step, step.node, events)
                edits = [(owner, move_after(owner, line, anchor))]
        self.report(zero.node, edits=edits)

    def _after_update(self, body, at_step: int, step: cst.Call, events: dict):
        """The step's statement, or the `scaler.update()` that follows it
        before any other backward, step or `zero_grad()`."""
        scaler = var(step.func.value)
        for statement in body[at_step + 1:]:
            if not isinstance(statement, cst.SimpleStatementLine):
                break
            call = statement.body[0].value if len(statement.body) == 1 and isinstance(
                statement.body[0], cst.Expr) else None
            if method_name(call) == "update" and scaler is not None and var(
                    call.func.value) == scaler:
                return statement
            if any(kind != "step" or self.model.stepped(site)
                   for kind, site in events.get(id(statement), ())):
                break
        return body[at_step]


def _event(site: Site) -> str | None:
    """What a mark does for this rule: "backward" (incl. gradients written by
    hand, `p.grad = g`, `p.grad.copy_(g)`), "zero" (`x.zero_grad()`) or "step"."""
    node = site.node
    name = last_name(node.func) if isinstance(node, cst.Call) else ""
    if SemanticModel.runs_backward(site):
        return "backward"  # incl. `self.manual_backward(loss)`, `engine.backward(loss)`
    if site.kind == GRAD:
        return None if isinstance(node, cst.Del) else "backward"
    if site.kind == ZERO and name == "zero_grad" and isinstance(node.func, cst.Attribute):
        return "zero"
    if site.kind == STEP and name == "step":
        return "step"
    return None
