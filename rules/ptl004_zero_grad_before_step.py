"""PTL004 zero-grad-before-step."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.statements import move_after
from ptlint.model import Safety
from ptlint.rules._training import (
    Optimizers,
    StatementRule,
    clearing_target,
    is_backward,
    is_zero_grad,
    key,
    method_name,
    owner_of,
    receiver,
)


@dataclass(eq=False)
class _Zero:
    call: cst.Call
    statement: cst.CSTNode
    path: tuple[cst.CSTNode, ...]


@dataclass
class _State:
    """What holds on one path through the code."""

    backward: bool = False  # a backward has run
    pending: list[_Zero] = field(default_factory=list)  # zero_grad after it, before any step

    def copy(self) -> "_State":
        return _State(self.backward, list(self.pending))


def _merge(*states: "_State | None") -> "_State | None":
    """Paths joining: what holds on every one of them that is still alive.
    A `zero_grad()` stays pending only if it is pending on all of them, so
    one in a branch of its own (`if not finite: optimizer.zero_grad()`, a
    deliberate skipped step) is not reported."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    pending = [z for z in live[0].pending
               if all(any(z is p for p in other.pending) for other in live[1:])]
    return _State(all(s.backward for s in live), pending)


_ENDS_PATH = (cst.Return, cst.Raise, cst.Continue, cst.Break)


class ZeroGradBeforeStep(StatementRule):
    """
    ## What it does
    Flags `zero_grad()` that runs after `.backward()` and before the
    optimizer step on the same path, with no other backward in between on
    any path from one to the other.

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

    def __init__(self, context) -> None:
        super().__init__(context)
        self.optimizers = Optimizers()
        # events in each statement, in order: (kind, node, path to it), kind one
        # of "backward" (or gradients written by hand), "zero", "step"
        self.events: dict[int, list[tuple[str, cst.Call, tuple]]] = {}
        self.functions: list[cst.FunctionDef] = []
        self.lambdas = 0
        self.reported: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node)
        self.functions.append(node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.lambdas += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.lambdas -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        self.optimizers.note_assignment(self, targets, node.value)
        if any(clearing_target(t) for t in targets):
            self._event("backward", node)  # `p.grad = g`: gradients written by hand

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.optimizers.note_assignment(self, [node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if clearing_target(node.target):
            self._event("backward", node)  # `p.grad += g`

    def visit_Call(self, node: cst.Call) -> None:
        name = method_name(node) or ""
        if is_backward(self, node) or name.endswith("backward"):
            kind = "backward"  # incl. `self.manual_backward(loss)`, `engine.backward(loss)`
        elif name.endswith("_") and clearing_target(receiver(node) or node):
            kind = "backward"  # `p.grad.copy_(g)`: gradients written by hand
        elif is_zero_grad(node):
            kind = "zero"
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "step":
            kind = "step"
        else:
            return
        self._event(kind, node)

    def _event(self, kind: str, node: cst.CSTNode) -> None:
        if self.lambdas:
            return  # runs later, if at all
        statement = self.innermost_statement()
        if statement is not None:
            path = tuple(self.path) if kind != "backward" else ()
            self.events.setdefault(id(statement), []).append((kind, node, path))

    # -- the scan ----------------------------------------------------------
    def finish(self) -> None:
        self._scan_body(self.module.body, _State())
        for function in self.functions:
            self._scan_suite(function.body, _State())

    def _scan_suite(self, suite: cst.BaseSuite, state: "_State | None") -> "_State | None":
        if isinstance(suite, cst.SimpleStatementSuite):
            return self._scan_small(suite, suite.body, state)
        return self._scan_body(suite.body, state)

    def _scan_body(self, body, state):
        for statement in body:
            if state is None:
                return None
            state = self._scan_statement(statement, state)
        return state

    def _scan_small(self, holder, smalls, state):
        state = self._apply(holder, state)
        if any(isinstance(s, _ENDS_PATH) for s in smalls):
            return None
        return state

    def _scan_statement(self, statement, state):
        if isinstance(statement, cst.SimpleStatementLine):
            return self._scan_small(statement, statement.body, state)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return state
        state = self._apply(statement, state)  # events in the header
        if isinstance(statement, cst.If):
            taken = self._scan_suite(statement.body, state.copy())
            if isinstance(statement.orelse, cst.If):
                other = self._scan_statement(statement.orelse, state.copy())
            elif isinstance(statement.orelse, cst.Else):
                other = self._scan_suite(statement.orelse.body, state.copy())
            else:
                other = state
            return _merge(taken, other)
        if isinstance(statement, (cst.For, cst.While)):
            # assume the body runs: a loop written to run zero times is rare,
            # and `for p in params: p.grad = g` must count
            looped = self._scan_suite(statement.body, state.copy())
            after = looped if looped is not None else state
            if statement.orelse is not None and after is not None:
                after = self._scan_suite(statement.orelse.body, after)
            return after
        if isinstance(statement, cst.With):
            return self._scan_suite(statement.body, state)
        if isinstance(statement, (cst.Try, cst.TryStar)):
            body = self._scan_suite(statement.body, state.copy())
            if statement.orelse is not None and body is not None:
                body = self._scan_suite(statement.orelse.body, body)
            handlers = [self._scan_suite(h.body, state.copy()) for h in statement.handlers]
            after = _merge(body, *handlers)
            if statement.finalbody is not None:
                final = self._scan_suite(statement.finalbody.body, after or state.copy())
                return final if after is not None else None
            return after
        if isinstance(statement, cst.Match):
            cases = [self._scan_suite(c.body, state.copy()) for c in statement.cases]
            return _merge(state, *cases)
        return state

    def _apply(self, statement: cst.CSTNode, state: _State) -> _State:
        for kind, call, path in self.events.get(id(statement), ()):
            if kind == "backward":
                state = _State(True, [])
            elif kind == "zero":
                if state.backward:
                    state = _State(True, [*state.pending, _Zero(call, statement, path)])
            else:
                stepped = self.optimizers.stepped(call)
                if stepped is None:
                    continue
                optimizer, closure = stepped
                if closure:  # the closure runs its own backward
                    state = _State(True, [])
                    continue
                left = []
                for zero in state.pending:
                    if self._clears_for(zero.call, optimizer):
                        self._report(zero, call, statement, path)
                    else:
                        left.append(zero)
                state = _State(state.backward, left)
        return state

    def _clears_for(self, zero: cst.Call, optimizer: cst.BaseExpression) -> bool:
        """Whether `zero` clears the gradients `optimizer` steps with."""
        target = key(receiver(zero))
        stepped = key(optimizer)
        if target is None or stepped is None:
            return False
        return target == stepped or self.optimizers.model_of.get(stepped) == target

    # -- report and fix ----------------------------------------------------
    def _report(self, zero: _Zero, step: cst.Call, statement, path) -> None:
        if id(zero.call) in self.reported:
            return
        self.reported.add(id(zero.call))
        owner = owner_of(zero.path, zero.statement)
        line = zero.statement
        fixable = (
            owner is not None
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
            and isinstance(line.body[0], cst.Expr)
            and line.body[0].value is zero.call
            and isinstance(statement, cst.SimpleStatementLine)
            and owner_of(path, statement) is owner
        )
        if not fixable:
            self.report(zero.call)
            return
        body = list(owner.body)
        at_zero = next(i for i, s in enumerate(body) if s is line)
        at_step = next(i for i, s in enumerate(body) if s is statement)
        if at_step < at_zero or any(self._backward_in(s) for s in body[at_zero + 1:at_step]):
            # a backward on some path in between: moving the zero_grad past it
            # would change more than the bug
            self.report(zero.call)
            return
        anchor = self._after_update(body, at_step, step)
        edit = self.block_edit(zero.path, owner, move_after(owner, line, anchor))
        self.report(zero.call, edits=[edit] if edit else ())

    def _backward_in(self, node: cst.CSTNode) -> bool:
        if any(kind == "backward" for kind, _, _ in self.events.get(id(node), ())):
            return True
        return any(self._backward_in(child) for child in node.children)

    def _after_update(self, body, at_step: int, step: cst.Call):
        """The step's statement, or the `scaler.update()` that follows it
        before any other backward, step or `zero_grad()`."""
        scaler = key(receiver(step))
        for statement in body[at_step + 1:]:
            if not isinstance(statement, cst.SimpleStatementLine):
                break
            for small in statement.body:
                call = small.value if isinstance(small, cst.Expr) else None
                if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                        and call.func.attr.value == "update" and scaler is not None
                        and key(call.func.value) == scaler and len(statement.body) == 1):
                    return statement
            if any(k != "step" or self.optimizers.stepped(c)
                   for k, c, _ in self.events.get(id(statement), ())):
                break
        return body[at_step]
