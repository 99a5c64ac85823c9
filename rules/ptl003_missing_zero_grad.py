"""PTL003 missing-zero-grad."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ptlint.fixers.statements import insert_before, simple_statement
from ptlint.model import Safety
from ptlint.rules._training import (
    LOOPS,
    Optimizers,
    StatementRule,
    bound_keys,
    clearing_target,
    clears_gradients,
    is_backward,
    is_distributed_autograd,
    key,
    method_name,
)


@dataclass(eq=False)
class _Loop:
    node: cst.For | cst.While
    parent: "_Loop | None"
    # (call, path of statements and blocks down to it, inside a lambda)
    backwards: list[tuple[cst.Call, tuple[cst.CSTNode, ...], bool]] = field(default_factory=list)
    steps: list[cst.Call] = field(default_factory=list)
    clears: bool = False
    distributed: bool = False
    calls: set[str] = field(default_factory=set)  # names called, for helpers that zero
    blocked: bool = False  # a nested loop is reported (or zeroes) instead

    def absorb(self, child: "_Loop") -> None:
        self.backwards += child.backwards
        self.steps += child.steps
        self.clears |= child.clears
        self.distributed |= child.distributed
        self.calls |= child.calls


class MissingZeroGrad(StatementRule):
    """
    ## What it does
    Flags a loop that calls `.backward()` and steps an optimizer but never
    clears the gradients inside the loop.

    The step is `optimizer.step()` or `scaler.step(optimizer)` (not
    `scheduler.step()`); clearing is `optimizer.zero_grad()`,
    `model.zero_grad()`, `p.grad = None`, `p.grad.zero_()`, or a call of a
    helper defined in the same file that does one of these.

    ## Why is this bad?
    `.backward()` adds to `.grad`; it never overwrites it. Without clearing,
    every step applies the sum of the gradients of all the batches seen so
    far, so the effective learning rate grows with every iteration and
    training diverges or stalls.

    Gradient accumulation (clearing only every `k` batches, inside the loop),
    an LBFGS closure that clears, distributed autograd (gradients live in a
    per-iteration context) and an optimizer built anew in every iteration
    are not flagged. In nested loops the rule reports the innermost loop
    that both backpropagates and steps.

    ## Example
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe. The fix inserts `<optimizer>.zero_grad()` just before the
    statement that calls `.backward()`, in the same block; when the backward
    runs in a nested loop (micro-batches), it goes before that nested loop,
    so the micro-batch gradients still add up within one step. This changes
    what every step does, on purpose: parameters after the fix differ from
    before. The tool cannot rule out that the gradients are cleared
    somewhere it does not see (a callback, a helper in another module, a
    hook on the optimizer), in which case the inserted call is redundant,
    or that accumulating across the loop was intended, in which case it is
    wrong. Review the diff. No fix is offered when the loop steps several
    optimizers or the optimizer is not a plain name or attribute.

    ## References
    - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    - [torch.optim.Optimizer.zero_grad](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    """

    code = "PTL003"
    message = ("Loop calls `.backward()` and steps the optimizer but never clears the gradients: "
               "they add up across iterations")
    fix_title = "Call `zero_grad()` before the backward pass"
    fix_safety = Safety.UNSAFE
    requires_text = ("backward",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.optimizers = Optimizers()
        self.loops: list[_Loop] = []
        self.open: list[_Loop] = []
        self.functions: list[str] = []  # names of the enclosing defs
        self.zeroing: set[str] = set()  # defs that clear gradients themselves
        self.def_calls: dict[str, set[str]] = {}
        self.lambdas = 0

    # -- context ---------------------------------------------------------
    def _visit_loop(self, node: cst.For | cst.While) -> None:
        self._enter(node)
        loop = _Loop(node, self.open[-1] if self.open else None)
        self.loops.append(loop)
        self.open.append(loop)

    def _leave_loop(self, original_node: cst.For | cst.While) -> None:
        loop = self.open.pop()
        if loop.parent is not None:
            loop.parent.absorb(loop)
        self._leave(original_node)

    def visit_For(self, node: cst.For) -> None:
        self._visit_loop(node)

    def leave_For(self, original_node: cst.For) -> None:
        self._leave_loop(original_node)

    def visit_While(self, node: cst.While) -> None:
        self._visit_loop(node)

    def leave_While(self, original_node: cst.While) -> None:
        self._leave_loop(original_node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node)
        self.functions.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self._leave(original_node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.lambdas += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.lambdas -= 1

    # -- events ----------------------------------------------------------
    def _clear(self) -> None:
        if self.open:
            self.open[-1].clears = True
        self.zeroing.update(self.functions)

    def visit_Assign(self, node: cst.Assign) -> None:
        targets = [t.target for t in node.targets]
        self.optimizers.note_assignment(self, targets, node.value)
        if any(clearing_target(t) for t in targets):
            self._clear()

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.optimizers.note_assignment(self, [node.target], node.value)
        if clearing_target(node.target):
            self._clear()

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
        if any(clearing_target(getattr(t, "value", t)) for t in targets):
            self._clear()

    def visit_Call(self, node: cst.Call) -> None:
        name = method_name(node)
        if name is not None:
            if self.open:
                self.open[-1].calls.add(name)
            for function in self.functions:
                self.def_calls.setdefault(function, set()).add(name)
        if clears_gradients(node):
            self._clear()
        if not self.open:
            return
        loop = self.open[-1]
        if is_distributed_autograd(self, node):
            loop.distributed = True
        elif is_backward(self, node):
            loop.backwards.append((node, tuple(self.path), self.lambdas > 0))
        elif name == "step":
            loop.steps.append(node)

    # -- decision --------------------------------------------------------
    def finish(self) -> None:
        zeroing = set(self.zeroing)
        changed = True
        while changed:  # helpers that call helpers that clear
            changed = False
            for function, calls in self.def_calls.items():
                if function not in zeroing and calls & zeroing:
                    zeroing.add(function)
                    changed = True
        for loop in reversed(self.loops):  # children before parents
            steps = [s for s in (self.optimizers.stepped(c) for c in loop.steps) if s]
            trains = bool(loop.backwards) and bool(steps)
            cleared = loop.clears or bool(loop.calls & zeroing) or loop.distributed
            if trains and loop.parent is not None:
                loop.parent.blocked = True
            if not trains or cleared or loop.blocked:
                continue
            optimizers = [optimizer for optimizer, _ in steps]
            built = bound_keys(loop.node.body, from_calls=True)
            if all(key(o) in built for o in optimizers):
                # a new optimizer each iteration (`opt = SGD([x], ...)` on a fresh
                # leaf): one step per optimizer, nothing to accumulate
                continue
            self._report(loop, optimizers)

    def _report(self, loop: _Loop, optimizers: list[cst.BaseExpression]) -> None:
        names = {key(o) for o in optimizers}
        optimizer = optimizers[0]
        if (len(names) != 1 or not isinstance(optimizer, (cst.Name, cst.Attribute))
                or key(optimizer) is None or _rebound(loop.node, key(optimizer))):
            self.report(loop.node)
            return
        where = self._insertion_point(loop)
        if where is None:
            self.report(loop.node)
            return
        path, owner, anchor = where
        statement = simple_statement(f"{key(optimizer)}.zero_grad()")
        edit = self.block_edit(path, owner, insert_before(owner, anchor, statement))
        self.report(loop.node, edits=[edit] if edit else ())

    def _insertion_point(self, loop: _Loop):
        """(path, block, statement): where `zero_grad()` goes so that it runs
        before every backward of one iteration, or None."""
        chains = []
        for call, path, in_lambda in loop.backwards:
            if in_lambda:
                return None
            at = next(i for i, n in enumerate(path) if n is loop.node)
            chain = []  # (block, statement) pairs from the loop's body down
            i = at + 1
            while i < len(path):
                block = path[i]
                if isinstance(block, cst.If):  # an `elif`: part of the `if` above
                    i += 1
                    continue
                if not isinstance(block, cst.IndentedBlock) or i + 1 >= len(path):
                    return None  # a one-line suite
                statement = path[i + 1]
                if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                    return None  # runs later, in a closure
                chain.append((block, statement))
                if isinstance(statement, LOOPS):
                    break
                i += 2
            if not chain or not isinstance(chain[-1][1], (cst.SimpleStatementLine, *LOOPS)):
                return None
            chains.append((path, chain))
        first_path, first = chains[0]
        depth = 0
        while depth < len(first) and all(
                len(c) > depth and c[depth][0] is first[depth][0] and c[depth][1] is first[depth][1]
                for _, c in chains):
            depth += 1
        if depth == len(first):
            block, statement = first[-1]
        elif all(len(c) > depth and c[depth][0] is first[depth][0] for _, c in chains):
            block, statement = first[depth]  # siblings: before the earliest
        elif depth > 0:
            block, statement = first[depth - 1]  # different branches: before the branching
        else:
            return None
        return first_path, block, statement


def _rebound(loop: cst.For | cst.While, optimizer: str | None) -> bool:
    """Whether the loop body rebinds the optimizer (or the name it hangs off)."""
    if optimizer is None:
        return False
    bound = bound_keys(loop.body)
    return optimizer in bound or optimizer.split(".")[0] in bound
