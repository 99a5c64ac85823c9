"""PTL001 loss-kept-with-graph."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.dataflow import (PY_CONVERSIONS, bound, calls_in, closure, last_name,
                                     method_name, target_vars, var, vars_in)
from ptlint.analysis.names import dotted
from ptlint.analysis.semantic import BACKPROP, BACKWARD, STEP, Function
from ptlint.analysis.walk import children
from ptlint.analysis.training import INSTANCE, MODULE, OFF
from ptlint.fixers.expressions import call_method
from ptlint.model import Safety
from ptlint.rule import Rule

_AUTOGRAD = frozenset({"torch.autograd.backward", "torch.autograd.grad"})
# Methods whose result still carries the receiver's graph.
_KEEPS_GRAPH = frozenset({"mean", "sum", "squeeze", "unsqueeze", "view", "reshape", "float",
                          "double", "half", "to", "cpu", "cuda", "clone", "abs", "sqrt",
                          "contiguous", "flatten", "mul", "div", "add", "sub"})
# Methods and attributes whose result carries no graph.
_DETACHING = frozenset({"detach", "item", "tolist", "numpy", "data"})
# Methods through which a value flows into the receiver.
_STORING = frozenset({"append", "extend", "insert", "add", "update", "appendleft",
                      "setdefault", "put"})
# Calls made for their output only: what they are given does not escape.
_REPORTING = frozenset({"print", "log", "info", "debug", "warning", "warn", "error",
                        "add_scalar", "add_scalars", "write", "set_postfix", "set_description",
                        "log_dict", "log_metrics"})
_GRAPH_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)
# Builtins that turn a tensor into a Python value (`float(loss)`; not `round`, whose
# result is a tensor).
_HOST = frozenset(name.removeprefix("builtins.") for name in PY_CONVERSIONS)

_LOSS, _OUTPUT, _DETACHED, _OTHER = "loss", "output", "detached", "other"


class LossKeptWithGraph(Rule):
    """
    ## What it does
    Flags a tensor that carries an autograd graph being kept across loop
    iterations: `losses.append(loss)`, `history["train"].append(loss)`,
    `losses += [loss]`, `losses.extend([loss])`, `total += loss`,
    `total = total + loss` and `total = loss if total is None else total + loss`,
    where `loss` is the value `.backward()` is called
    on in the same loop (or a term of it: `(a + b).backward()`,
    `torch.stack(losses).mean().backward()`; not an argument of a call,
    `td_loss(s, a, r).backward()`), or the result of a loss function (`criterion(...)`,
    `loss_fn(...)`, an `nn.*Loss` instance, `F.cross_entropy`, `F.*_loss`)
    computed outside `torch.no_grad()`, including every tensor of one call
    (`cls_loss, loc_loss = criterion(...)`). In a function that trains, it
    also flags the output of a module of the file kept that way
    (`samples.append(G(fixed_z))` once per epoch of a GAN).

    It stays silent for values stored through `.item()`, `.detach()`,
    `float(...)`, `.tolist()` or `.cpu().numpy()`, for code under
    `torch.no_grad()` or `torch.inference_mode()` (block or decorator; also a
    project's context manager called with `no_grad=True`), for a
    value rebound to its detached form (or to anything not a loss, after its
    backward pass: `cost = evaluate(model)`) before it is stored, for a list or
    total created afresh in each iteration (of the loop that takes the
    optimizer's step, when an inner loop fills it; or in each call of a
    function that takes one optimizer step, after its loops), and for an
    accumulation whose
    result is itself backpropagated later (per-head or per-timestep losses
    summed, then `.backward()` on the sum; chunk losses stacked, then
    backpropagated). Loss values that are not backpropagated in the loop are
    also left alone when the list or total is returned or handed to another
    function, which may backpropagate it (not when only its number is:
    `history.append(total.item())`, `return float(total)`), and so are values
    appended to an
    object of some other class built in the file (`meter = AverageMeter()`,
    then `meter.append(loss)`: its method may detach). Lists, deques, dicts
    of lists and receivers of unknown type (a parameter) are still flagged.

    ## Why is this bad?
    A loss tensor references the graph that produced it, and through the graph
    every activation saved for the backward pass. Keeping it in a list, or
    adding it to a running total (which turns the total into a tensor whose
    graph links every step's graph), keeps all of that alive for as long as
    the list or total lives: memory grows with every step until the process
    runs out of it. `total_loss += loss` does this even when `total_loss`
    started as the float `0.0`.

    ## Example
    ```python
    import torch.nn as nn

    criterion = nn.MSELoss()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    ```

    Use instead:
    ```python
    import torch.nn as nn

    criterion = nn.MSELoss()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())  # or loss.item() for a Python float
    ```

    ## Fix safety
    The fix stores `value.detach()`: a tensor with the same values, dtype and
    device, sharing the same memory, but without the graph. `.item()` also
    works where a Python number is wanted; it is not what the fix writes
    because it synchronises with the GPU on every step and changes the type.

    The fix is safe when the stored value is the one `.backward()` is called
    on in the same loop, or a loss that goes into it (without `retain_graph=`
    or `create_graph=`): that backward pass has already consumed and freed
    the graph, so nothing can differentiate through the stored value again. Only the tensor's repr
    (no `grad_fn=`) and `requires_grad` differ.

    It is unsafe otherwise (a loss value or a model output stored without
    being backpropagated in the loop, or a backward that retains the graph):
    ptlint sees one
    function at a time, and code elsewhere that backpropagates through the
    stored or accumulated value would lose those gradients or fail.
    Accumulations that are backpropagated in the same function are never
    flagged.

    ## References
    - [PyTorch FAQ: don't accumulate history across your training loop](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [`Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    code = "PTL001"
    message = ("Tensor kept across loop iterations with its autograd graph, so memory grows "
               "every step; store its `.detach()` (or `.item()` where a Python number is wanted)")
    fix_title = "Store the value with `.detach()`"
    fix_safety = Safety.UNSAFE
    requires_text = ("backward", "loss", "Loss", "criterion", "cross_entropy", "kl_div")

    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        for function in self.model.functions:
            if isinstance(function.node, (cst.Module, cst.FunctionDef)) and function.loops and any(
                    kind == "small" and loops and _store(small) is not None
                    for kind, small, loops in function.events):
                _Analysis(self, function)


# -- the per-scope analysis ---------------------------------------------------
def _store(small: cst.BaseSmallStatement):
    """(accumulator, stored expressions) when `small` keeps values in a container
    or a running total, else None."""
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        method = method_name(small.value)
        plain = [a.value for a in small.value.args if a.keyword is None and not a.star]
        if (method, len(plain)) in (("append", 1), ("insert", 2)):
            return var(func.value), plain[-1:]
        if method == "extend" and len(plain) == 1 and isinstance(plain[0], (cst.List, cst.Tuple)):
            return var(func.value), _elements(plain[0])
    elif isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        value = small.value
        return var(small.target), (_elements(value) if isinstance(value, (cst.List, cst.Tuple))
                                   else [value])
    elif isinstance(small, cst.Assign) and len(small.targets) == 1:
        items = _added(small.value, small.targets[0].target)
        if items is not None:
            return var(small.targets[0].target), items
    return None


def _elements(sequence: cst.List | cst.Tuple) -> list[cst.BaseExpression]:
    return [e.value for e in sequence.elements if not isinstance(e, cst.StarredElement)]


def _added(value: cst.BaseExpression, target: cst.BaseExpression) -> list | None:
    """What `target = target + x` (or `x + target`) stores in `target`; through
    a conditional expression, what either branch stores (`total = loss if total
    is None else total + loss`)."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        if value.left.deep_equals(target):
            return [value.right]
        if value.right.deep_equals(target):
            return [value.left]
    elif isinstance(value, cst.IfExp):
        branches = [(branch, _added(branch, target)) for branch in (value.body, value.orelse)]
        if any(added is not None for _, added in branches):
            return [item for branch, added in branches for item in (
                added if added is not None else [] if branch.deep_equals(target) else [branch])]
    return None


def _leaves(expr: cst.BaseExpression):
    """The values whose graph `expr` carries: through `+ - * / **`, unary
    operators and methods that keep the graph (`loss.mean()`, `x.to(device)`)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _GRAPH_OPS):
        yield from _leaves(expr.left)
        yield from _leaves(expr.right)
    elif isinstance(expr, cst.UnaryOperation):
        yield from _leaves(expr.expression)
    elif method_name(expr) in _KEEPS_GRAPH:
        yield from _leaves(expr.func.value)
    else:
        yield expr


class _Analysis:
    def __init__(self, rule: LossKeptWithGraph, function: Function) -> None:
        self.rule, self.model, self.function = rule, rule.model, function
        self.state: dict[str, str] = {}
        # a model's outputs count in training code only (where its parameters want gradients)
        self.trains = any(s.kind == BACKWARD for s in function.all_sites())
        self._prepass()
        self._scan()

    # -- pass 1: what is backpropagated, what flows where ------------------
    def _prepass(self) -> None:
        self.roots: dict[int, set[str]] = {}  # id(loop) -> vars backpropagated inside it
        self.retained: dict[int, set[str]] = {}
        self.stepping: set[int] = set()  # id(loop) of the loops a backward runs in directly
        self.optimizing: set[int] = set()  # and those an optimizer step runs in directly
        all_roots: set[str] = set()
        self.steps_once = False  # an optimizer step outside the function's loops
        self.backward_at: dict[str, list[int]] = {}  # name -> events that backpropagate it
        smalls = {id(node): i for i, (kind, node, _) in enumerate(self.function.events)
                  if kind == "small"}
        for site in self.function.all_sites():
            if self.model.is_mark(site, STEP):
                if site.ctx.loop is None:
                    self.steps_once = True
                else:
                    self.optimizing.add(id(site.ctx.loop.node))
            found = self._backward_roots(site.node) if site.kind in (BACKWARD, BACKPROP) else None
            if found is None:
                continue
            all_roots |= found[0]
            line = site.line
            if type(line) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
                for small in line.body:  # the small statement of its line that holds it
                    if id(small) in smalls and (len(line.body) == 1 or any(
                            call is site.node for call in calls_in(small))):
                        for name in found[0]:
                            self.backward_at.setdefault(name, []).append(smalls[id(small)])
            if site.ctx.loop is not None:
                self.stepping.add(id(site.ctx.loop.node))
            for loop in site.ctx.loop.outward() if site.ctx.loop is not None else ():
                self.roots.setdefault(id(loop.node), set()).update(found[0])
                if found[1]:
                    self.retained.setdefault(id(loop.node), set()).update(found[0])
        returned: set[str] = set()
        flows: list[tuple[set[str], set[str]]] = []
        for kind, node, _ in self.function.events:
            if kind == "small":
                _flows(node, flows, returned)
            elif kind == "for":
                flows.append((set(target_vars(node.target)), vars_in(node.iter)))
            elif kind == "with":
                flows += [(set(target_vars(item.asname.name)), vars_in(item.item))
                          for item in node.items if item.asname is not None]
        # what flows into a loop's backpropagated values (`cls_loss` of `loss = cls_loss + ...`)
        self.feeds = {loop: closure(found, flows) for loop, found in self.roots.items()}
        self.backpropagated = closure(all_roots, flows)
        self.escapes = closure(all_roots | returned, flows)

    def _backward_roots(self, call: cst.Call) -> tuple[set[str], bool] | None:
        """The variables a backward call differentiates, and whether it keeps the graph."""
        func = call.func
        plain = [a.value for a in call.args if a.keyword is None and not a.star]
        retain = any(a.keyword is not None and a.keyword.value in ("retain_graph", "create_graph")
                     and not (isinstance(a.value, cst.Name) and a.value.value in ("False", "None"))
                     for a in call.args)
        if last_name(func) in ("backward", "grad") and self.function.resolve(func) in _AUTOGRAD:
            return self._roots(plain[0] if plain else next(
                (a.value for a in call.args if a.keyword is not None
                 and a.keyword.value in ("tensors", "outputs")), None)), retain
        if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward"):
            return self._roots(func.value) | self._roots(plain[0] if plain else None), retain
        return None

    def _roots(self, expr: cst.BaseExpression | None) -> set[str]:
        """The variables a backward pass through `expr` differentiates: the leaves
        of its graph, through a list's items and torch's functions of tensors
        (`torch.stack(losses)`), not the arguments of any other call
        (`td_loss(s, a, r).backward()` does not make the reward `r` a tensor)."""
        if expr is None:
            return set()
        if isinstance(expr, (cst.List, cst.Tuple)):
            return {v for item in expr.elements for v in self._roots(item.value)}
        found = _graph_vars(expr)
        for leaf in _leaves(expr):
            if isinstance(leaf, cst.Call) and (self.function.resolve(leaf.func) or "").startswith(
                    ("torch.", "builtins.sum")):
                found |= {v for a in leaf.args if a.keyword is None for v in self._roots(a.value)}
        return found

    # -- pass 2: bindings in order, and the stores -------------------------
    def _scan(self) -> None:
        nograd = [self.function.ctx.grad == OFF]
        self.resets: dict[int, set[str]] = {}  # id(loop) -> names bound afresh in each iteration
        self.fresh: set[str] = set()  # names bound outside any loop, once per call
        # the event that last bound each name: one bound after its backward pass (see
        # `backward_at`) holds some other value
        self.bound_at: dict[str, int] = {}
        for self.at, (kind, node, loops) in enumerate(self.function.events):
            if kind == "with":
                nograd.append(self.model.context(node).grad == OFF)
            elif kind == "end_with":
                nograd.pop()
            self.nograd = nograd[-1]
            if kind == "small":
                self._small(node, loops)
            elif kind == "def":
                self.state.pop(node.name.value, None)
            else:  # the names a loop, a `with` or an `except` binds
                for target in bound(kind, node):
                    self._bind(target, None, loops)

    def _backpropagated_before(self, name: str) -> int:
        """The last event up to this one that backpropagates through `name`; -1 if none."""
        return max((at for at in self.backward_at.get(name, ()) if at <= self.at), default=-1)

    def _small(self, small: cst.CSTNode, loops: tuple) -> None:
        store = _store(small)
        if store is not None and loops and not self.nograd:
            self._check(small, store[0], store[1], loops)
        if isinstance(small, cst.Assign):
            for target in small.targets:  # an accumulation carries the total over
                self._bind(target.target, small.value, loops, store is None)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            self._bind(small.target, small.value, loops)
        elif isinstance(small, cst.AugAssign) and isinstance(small.target, (cst.Name, cst.Attribute)):
            name = var(small.target)
            if name is not None and self.state.get(name) not in (_LOSS, _OUTPUT):
                self.state[name] = (None if self.nograd else self._carries(small.value)) or _OTHER

    def _bind(self, target, value, loops, reset: bool = True) -> None:
        kind = self._kind(value) if value is not None else _OTHER
        if not isinstance(target, (cst.Name, cst.Attribute)) and kind != _LOSS:
            kind = _OTHER  # `cls_loss, loc_loss = criterion(...)`: each one is a loss
        for name in target_vars(target):
            self.state[name] = kind
            self.bound_at[name] = self.at
            if reset:
                for loop in loops:
                    self.resets.setdefault(id(loop), set()).add(name)
                if not loops:
                    self.fresh.add(name)
            # forget what was known about `name.attr`
            for known in [k for k in self.state if k.startswith(name + ".")]:
                del self.state[known]

    def _kind(self, value: cst.BaseExpression) -> str:
        if self._detaches(value):
            return _DETACHED
        if isinstance(value, (cst.Name, cst.Attribute)):
            name = dotted(value)
            if name is not None and name in self.state:
                return self.state[name]  # an alias keeps what it aliases
        carried = self._carries(value)
        return _OTHER if carried is None else _DETACHED if self.nograd else carried

    def _detaches(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, cst.Call):
            func = expr.func
            if last_name(func) in ("float", "int") and self.function.resolve(func) in (
                    "builtins.float", "builtins.int"):
                return True
            method = method_name(expr)
            return method in _DETACHING or (method in _KEEPS_GRAPH and self._detaches(func.value))
        if isinstance(expr, cst.BinaryOperation):
            sides = (expr.left, expr.right)
            return (any(self._detaches(s) for s in sides)
                    and all(self._detaches(s) or not _graph_vars(s) for s in sides))
        if isinstance(expr, cst.UnaryOperation):
            return self._detaches(expr.expression)
        return False

    def _carries(self, expr: cst.BaseExpression) -> str | None:
        """`_LOSS` when `expr` is (derived from) the result of a loss function,
        `_OUTPUT` when from a call of a module of the file in training code."""
        for leaf in _leaves(expr):
            if isinstance(leaf, cst.Call) and self.model.bindings.is_loss_call(leaf, self.function):
                return _LOSS
            if isinstance(leaf, cst.Call) and self.trains and isinstance(
                    leaf.func, (cst.Name, cst.Attribute)) and self.model.holds(
                    var(leaf.func), self.function) == MODULE:
                return _OUTPUT  # `G(fixed_z)`
            state = self.state.get(dotted(leaf) or "") if isinstance(
                leaf, (cst.Name, cst.Attribute)) else None
            if state in (_LOSS, _OUTPUT):
                return state
        return None

    def _check(self, small, accumulator, items, loops) -> None:
        # a fresh container or total every iteration, or every iteration of the loop that
        # takes the optimizer's step (else runs a backward) around the inner one
        # (`for batch ...: parts = []`, then `for head ...: parts.append(loss)`)
        step = next((i for i in range(len(loops) - 1, -1, -1) if id(loops[i]) in self.optimizing),
                    None)
        if step is None:
            step = next((i for i in range(len(loops) - 1, -1, -1)
                         if id(loops[i]) in self.stepping), len(loops) - 1)
        if accumulator is None or any(accumulator in self.resets.get(id(loop), ())
                                      for loop in loops[step:]):
            return
        if accumulator in self.fresh and self.steps_once and not any(
                id(loop) in self.optimizing for loop in loops):
            return  # a total of one optimizer step, taken after the loops, once per call
        loop = loops[-1]
        if accumulator in self.backpropagated:
            return  # summed or stacked to be backpropagated: the graph is wanted
        if isinstance(small, cst.Expr) and self.model.holds(accumulator, self.function) == INSTANCE:
            return  # `meter.append(loss)` on an object of another class: it may detach
        roots, feeds, retained = (found.get(id(loop), set())
                                  for found in (self.roots, self.feeds, self.retained))
        edits, safe, output = [], True, False
        for item in items:
            if self._detaches(item):
                continue
            backward = [g for g in _graph_vars(item) if self.state.get(g) != _DETACHED and (
                g in roots and self.bound_at.get(g, -1) <= self._backpropagated_before(g)
                or (g in feeds and self.state.get(g) == _LOSS))]
            carried = self._carries(item)
            if backward:  # its graph was consumed by the backward pass of this loop
                safe = safe and not (retained and (set(backward) & retained or set(backward) - roots))
            elif carried is None or (carried == _LOSS and accumulator in self.escapes):
                continue
            else:
                safe = False
                output = output or carried == _OUTPUT
            edits.append((item, call_method(item, "detach")))
        if not edits:
            return
        name = dotted(edits[0][0])
        if output:
            message = (f"`{cst.Module([]).code_for_node(edits[0][0])}` is a model output kept "
                       "across loop iterations with its autograd graph, so memory grows with "
                       "every iteration; store its `.detach()`")
        else:
            message = None if name is None else (
                f"`{name}` is kept across loop iterations with its autograd graph, so memory "
                f"grows every step; store `{name}.detach()` (or `{name}.item()` where a Python "
                "number is wanted)")
        self.rule.report(small, message=message, edits=edits,
                         safety=Safety.SAFE if safe else Safety.UNSAFE)


def _graph_vars(expr: cst.BaseExpression) -> set[str]:
    """The variables whose graph the value of `expr` would carry."""
    return {dotted(leaf) for leaf in _leaves(expr) if isinstance(leaf, cst.Name) or (
        isinstance(leaf, cst.Attribute) and leaf.attr.value not in _DETACHING)} - {None}


def _carried(node: cst.CSTNode | None) -> set[str]:
    """The variables whose values (and graphs) `node` carries on: those it mentions
    (see `vars_in`), leaving out what it reads only through a detaching call or
    `.data` (`loss.item()`, `float(loss)`, `loss.detach()`): no graph flows on from
    those."""
    found: set[str] = set()
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Call and (method_name(current) in _DETACHING or (
                type(current.func) is cst.Name and current.func.value in _HOST)):
            continue
        if kind is cst.Attribute and current.attr.value == "data":
            continue
        if kind in (cst.Name, cst.Attribute) and dotted(current) is not None:
            found |= vars_in(current)
        elif kind is cst.Arg:
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return found


def _flows(small: cst.CSTNode, flows: list, returned: set[str]) -> None:
    """Record where values flow; `returned` collects what leaves the function
    (returned, yielded, or handed to a call made for its side effects)."""
    if isinstance(small, cst.Assign):
        targets = {v for t in small.targets for v in target_vars(t.target)}
        flows.append((targets, _carried(small.value)))
    elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
        if small.value is not None:
            flows.append((set(target_vars(small.target)), _carried(small.value)))
    elif isinstance(small, cst.Return):
        returned |= _carried(small.value)
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Yield):
        returned |= _carried(small.value.value)
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        args = cst.Tuple([cst.Element(a.value) for a in small.value.args])
        if isinstance(func, cst.Attribute) and func.attr.value in _STORING:
            if var(func.value) is not None:
                flows.append(({var(func.value)}, _carried(args)))
        elif last_name(func) not in _REPORTING:
            # handed to code this rule does not see (`self.optimize(total)`)
            returned |= _carried(args)
