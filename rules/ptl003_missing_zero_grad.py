"""PTL003 missing-zero-grad."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import bound_in, var
from ptlint.analysis.semantic import BACKWARD, GRAD, STEP, ZERO, Function, Loop, Site
from ptlint.analysis.training import clears_gradients
from ptlint.fixers.arguments import argument
from ptlint.fixers.statements import insert_before, simple_statement
from ptlint.model import Safety
from ptlint.rule import Rule

# The statements and blocks a fix looks through, from the loop down to the backward call.
_STATEMENTS = (cst.SimpleStatementLine, cst.For, cst.While, cst.If, cst.With, cst.Try,
               cst.TryStar, cst.FunctionDef, cst.ClassDef, cst.Match, cst.IndentedBlock,
               cst.SimpleStatementSuite)
_LOOPS = (cst.For, cst.While)
_DISTRIBUTED = ("torch.distributed.autograd.", "torch.distributed.optim.")
_LBFGS = frozenset({"torch.optim.LBFGS", "torch.optim.lbfgs.LBFGS"})


class MissingZeroGrad(Rule):
    """
    ## What it does
    Flags a loop that calls `.backward()` and steps an optimizer but never
    clears the gradients inside the loop, and a closure handed to an `LBFGS`
    optimizer's `step` that calls `.backward()` but clears nothing (LBFGS
    evaluates it up to `max_iter` times in one step; not with `max_iter=1`).

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
    an LBFGS closure that clears, a closure handed to another optimizer
    (which evaluates it once, after the loop's own clearing), distributed
    autograd (gradients live in a per-iteration context) and an optimizer
    built anew in every iteration are not flagged. In nested loops the rule
    reports the innermost loop that both backpropagates and steps. A call of
    a helper defined in the same file that runs the backward pass or the
    step on every call counts as one, and a step function handed to a
    training engine that runs it once per iteration (pytorch-ignite's
    `Engine(update)`) is checked like a loop body.

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

    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.blocked: set[Loop] = set()  # loops around a loop that trains: it is reported

    def leave_Module(self, node: cst.Module) -> None:
        engines = self.model.engine_steps
        for function in self.model.functions:
            trained = False
            for loop in reversed(function.loops):  # inner loops first
                trains = self._check(loop, loop.node, list(loop.walk()))
                if trains and loop.parent is not None:
                    self.blocked.add(loop.parent)
                trained |= trains
            if function in engines and not trained:
                self._check(function, function.node, [function, *function.loops])
        if "LBFGS" in self.context.source:
            self._closures()

    def _closures(self) -> None:
        """Report a closure handed to an `LBFGS` optimizer's `step` that
        backpropagates and clears no gradients: LBFGS evaluates it up to
        `max_iter` times in one step, and the gradients add up across those."""
        model = self.model
        # what each name is bound to: True for an LBFGS optimizer (that evaluates the
        # closure more than once), False for anything else; a plain name per scope
        bound: dict[object, set[bool]] = {}
        for function in model.functions:
            for kind, node, _ in function.events:
                if kind != "small" or type(node) is not cst.Assign:
                    continue
                value = node.value
                lbfgs = type(value) is cst.Call and function.resolve(value.func) in _LBFGS \
                    and not _once(argument(value, "max_iter", 2))
                for name in (var(t.target) for t in node.targets):
                    if name is not None:
                        key = name if "." in name else (id(function), name)
                        bound.setdefault(key, set()).add(lbfgs)
        for function in model.functions:
            for site in function.all_sites():
                stepped = model.stepped(site) if site.kind == STEP else None
                name = var(stepped[0]) if stepped is not None and stepped[1] else None
                if name is None:
                    continue
                kinds = bound.get(name) if "." in name else next(
                    (bound[key] for key in ((id(scope), name) for scope in function.outward())
                     if key in bound), None)
                if kinds != {True}:
                    continue
                handed = argument(site.node, "closure", 0)
                if handed is None or type(handed.value) is not cst.Name:
                    continue
                for closure in model.defs_named(handed.value, function):
                    self._closure(closure, stepped[0], nested=closure.parent is function)

    def _closure(self, closure: Function, optimizer: cst.BaseExpression, nested: bool) -> None:
        model = self.model
        sites = closure.all_sites()
        backwards = [s for s in sites if model.is_backward(s)]
        if not backwards or any(s.kind in (ZERO, GRAD) and clears_gradients(s.node)
                                for s in sites) or closure.every("calls") & model.helpers(ZERO):
            return
        point = self._insertion_point(closure.node, backwards) if nested else None
        self.report(closure.node.name, message=(
            "Closure handed to `LBFGS.step` calls `.backward()` but never clears the gradients: "
            "LBFGS evaluates it several times in one step, and they add up"),
            edits=() if point is None else [(point[0], insert_before(
                *point, simple_statement(f"{var(optimizer)}.zero_grad()")))])

    def _check(self, body: Loop | Function, node: cst.CSTNode, parts: list) -> bool:
        """Report `body` (a loop, or an engine's step function) when it trains
        without clearing; whether it trains. `parts`: it and its nested loops."""
        model = self.model
        sites = sorted((s for part in parts for s in part.sites), key=lambda s: s.order)
        backwards = [s for s in sites if model.is_backward(s)]
        steps = [found for found in map(model.stepped, (s for s in sites if s.kind == STEP)) if found]
        helper_calls = set().union(*(part.helper_calls for part in parts))
        trains = bool(backwards or helper_calls & model.helpers(BACKWARD, per_call=True)) and bool(
            steps or helper_calls & model.helpers(STEP, per_call=True))
        if not trains or body in self.blocked:
            return trains
        calls = set().union(*(part.calls for part in parts))
        if any(s.kind in (ZERO, GRAD) and clears_gradients(s.node) for s in sites) or (
                calls & model.helpers(ZERO)) or any(self._distributed(s) for s in backwards):
            return trains
        optimizers = [optimizer for optimizer, _ in steps]
        built = bound_in(body.events, from_calls=True)
        if optimizers and all(var(o) in built for o in optimizers):
            # a new optimizer each iteration (`opt = SGD([x], ...)` on a fresh
            # leaf): one step per optimizer, nothing to accumulate
            return trains
        self._report(body, node, backwards, optimizers)
        return trains

    def _distributed(self, site: Site) -> bool:
        name = self.model.qualified_name(site.node.func, site.ctx)
        if name is not None:
            return name.startswith(_DISTRIBUTED)
        base = var(site.node.func.value) if isinstance(site.node.func, cst.Attribute) else None
        return base is not None and base.split(".")[-1] in ("dist_autograd", "distributed_autograd")

    def _report(self, body: Loop | Function, node: cst.CSTNode, backwards: list[Site],
                optimizers: list[cst.BaseExpression]) -> None:
        where = node if isinstance(body, Loop) else node.name
        message = None if isinstance(body, Loop) else (
            "Step function run by the training engine calls `.backward()` and steps the "
            "optimizer but never clears the gradients: they add up across iterations")
        optimizer = var(optimizers[0]) if optimizers else None
        point = self._insertion_point(node, backwards) if (
            len({var(o) for o in optimizers}) == 1 and isinstance(optimizers[0], (
                cst.Name, cst.Attribute)) and optimizer is not None
            and not _rebound(body, optimizer)) else None
        self.report(where, message=message, edits=() if point is None else [(point[0], insert_before(
            *point, simple_statement(f"{optimizer}.zero_grad()")))])

    def _insertion_point(self, root: cst.CSTNode, backwards: list[Site]):
        """(block, statement): where `zero_grad()` goes so that it runs before
        every backward of one iteration, or None."""
        chains = []
        for site in backwards:
            path = [n for n in self.model.path(site.node, root) if isinstance(n, _STATEMENTS)]
            chain = []  # (block, statement) pairs from the loop's body down
            for block, statement in zip(path, path[1:]):
                if isinstance(statement, cst.SimpleStatementSuite):
                    return None  # a one-line suite
                if isinstance(block, cst.IndentedBlock):  # not an `elif`'s `if`
                    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                        return None  # runs later, in a closure
                    chain.append((block, statement))
                    if isinstance(statement, _LOOPS):
                        break
            if not chain or not isinstance(chain[-1][1], (cst.SimpleStatementLine, *_LOOPS)):
                return None
            chains.append(chain)
        if not chains:
            return None
        first, depth = chains[0], 0
        while depth < len(first) and all(c[depth:depth + 1] == first[depth:depth + 1] for c in chains):
            depth += 1
        if depth == len(first):
            return first[-1]
        if all(c[depth:depth + 1] and c[depth][0] is first[depth][0] for c in chains):
            return first[depth]  # siblings: before the earliest
        return first[depth - 1] if depth > 0 else None  # different branches: before the branching


def _once(max_iter: cst.Arg | None) -> bool:
    """`max_iter=1`: LBFGS then evaluates the closure once a step."""
    return max_iter is not None and type(max_iter.value) is cst.Integer and \
        max_iter.value.value == "1"


def _rebound(body: Loop | Function, optimizer: str) -> bool:
    """Whether the loop body rebinds the optimizer (or the name it hangs off)."""
    bound = bound_in(body.events[1:] if isinstance(body, Loop) else body.events)
    return optimizer in bound or optimizer.split(".")[0] in bound
