"""The semantic model of one file: what its training code does.

Modelled on ruff's `SemanticModel` and LibCST's metadata providers: one model
per file, built only when an enabled rule declares `semantic = True`, shared
by all of them, and queried instead of rebuilt by each. It is a visitor the
engine runs right after the name resolver and before every rule, so during
the walk `here` is where the walk is now (a `Ctx`: the function, loop,
comprehension or `with` block around the node, innermost first). Rules note
the nodes they care about with `site(node)` and ask their questions in
`leave_Module`, once the model has seen the whole file; the answers are
computed then, on demand, and cached.

What it answers:
- the functions (and the module, class bodies and lambdas) with their bodies
  in order (`Function.events`) and their loops (`Loop`);
- marks: backward calls, optimizer steps, gradient clearing and writes, and
  other backpropagating calls (`Function.all_sites()`, `Loop.sites`);
- which loops train (`Loop.training`: backward and an optimizer step, directly
  or through helpers defined in the file), which are hot (`Loop.hot`), and
  which functions a training engine runs once per iteration (`engine_steps`);
- the grad mode and autocast region of a context (`Ctx.grad`, `Ctx.autocast`),
  block and decorator forms, autocast held in a variable or attribute or built
  with `functools.partial`;
- what a name holds where it is known (`holds`, from `bindings`; the kinds are
  in `training`);
- the statement that holds a node (`Site.line`), the guards around it
  (`Site.periodic_within`), where it sits among statements (`path`) and
  paths through a body's statements (`scan`), from `statements`.

Names are resolved with the resolver's scopes, kept after the walk: a name
rebound after the node asked about resolves to its last binding there.
"""
from __future__ import annotations

import time
from functools import cached_property
from types import MethodType
from typing import Callable

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.bindings import Bindings
from ptlint.analysis.contexts import (  # noqa: F401 - the model's vocabulary, for rules
    BACKPROP, BACKWARD, CLASS, COMPREHENSION, ENGINE, FUNCTION, GRAD, LAMBDA, LOOP, MODULE, STEP,
    WITH, ZERO, Ctx, Function, Loop, Site)
from ptlint.analysis.dataflow import closure, last_name, var
from ptlint.analysis.names import NameResolver
from ptlint.analysis.statements import path, scan
from ptlint.analysis.walk import Visitor, descendants

_MARKS = {"backward": BACKWARD, "manual_backward": BACKWARD, "step": STEP,
          "optimizer_step": STEP, "grad": BACKPROP, "Engine": ENGINE,
          "DeterministicEngine": ENGINE}
_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine",
                      "ignite.engine.DeterministicEngine",
                      "ignite.engine.deterministic.DeterministicEngine"})


class SemanticModel(Visitor):
    """The model, and the walk hooks that build it (see the module docstring)."""

    def __init__(self, names: NameResolver, timings: dict[str, float] | None = None) -> None:
        super().__init__()
        self.names, self.timings = names, timings
        self.here: Ctx = None  # type: ignore[assignment]
        self.functions: list[Function] = []
        self.defs: dict[str, list[Function]] = {}
        self.engine_sites: list[Site] = []
        self._contexts: dict[int, Ctx] = {}  # by id of a `with`, loop or function node
        self._order = 0
        self._cache: dict = {}

    def release(self) -> None:
        """Drop what the model knows once the file is done: its functions, loops
        and contexts point at each other (and at the tree), so without this the
        whole tree waits for the garbage collector's full pass."""
        for function in self.functions:
            for loop in function.loops:
                loop.__dict__.clear()
            function.__dict__.clear()
        self.__dict__.clear()

    # -- for rules, during the walk -------------------------------------------------
    def site(self, node: cst.CSTNode, kind: str | None = None) -> Site:
        """`node` with where the walk is now."""
        self._order += 1
        return Site(node, kind, self.here, self._order)

    def context(self, node: cst.CSTNode) -> Ctx:
        """The context a `with` statement, a loop or a function opens."""
        return self._contexts[id(node)]

    # -- facts ----------------------------------------------------------------------
    def qualified_name(self, node: cst.CSTNode, where: "Ctx | Function") -> str | None:
        function = where if isinstance(where, Function) else where.function
        return self.names.qualified_name(node, function.scope)

    def is_backward(self, site: Site) -> bool:
        """A `BACKWARD` mark that is `x.backward(...)` or `torch.autograd.backward(...)`
        (not `self.manual_backward(loss)`)."""
        func = site.node.func if site.kind == BACKWARD else None
        if type(func) is cst.Attribute:
            return func.attr.value == "backward"
        return func is not None and self.qualified_name(func, site.ctx) == "torch.autograd.backward"

    @staticmethod
    def runs_backward(site: Site) -> bool:
        """A backward pass: a `BACKWARD` mark, or a backpropagating call named
        `...backward` (`self.manual_backward(loss)`, `accelerator.backward(loss)`,
        `backward_G()`); not `torch.autograd.grad`."""
        return site.kind == BACKWARD or (
            site.kind == BACKPROP and last_name(site.node.func).endswith("backward"))

    def is_mark(self, site: Site, kind: str) -> bool:
        """`BACKWARD` marks count as such; a `STEP` mark only when it steps an optimizer."""
        return site.kind == kind and (kind != STEP or self.stepped(site) is not None)

    def stepped(self, site: Site) -> tuple[cst.BaseExpression, bool] | None:
        """For a `.step(...)` call, the optimizer it steps and whether it passes
        a closure (`opt.step(closure)`); None when it is no optimizer step
        (`scheduler.step()`, `env.step(action)`)."""
        call, fn = site.node, site.ctx.function
        if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
            return None
        obj = call.func.value
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if call.func.attr.value == "optimizer_step":  # `xm.optimizer_step(optimizer)`
            return (positional[0].value, False) if positional else None
        if call.func.attr.value != "step" or self.kind_is(obj, fn, t.SCHEDULER):
            return None
        if positional and self.kind_is(positional[0].value, fn, t.OPTIMIZER):
            return positional[0].value, False  # `scaler.step(optimizer)`
        if self.kind_is(obj, fn, t.OPTIMIZER):
            return obj, bool(positional) or any(
                a.keyword is not None and a.keyword.value == "closure" for a in call.args)
        if positional and self.kind_is(obj, fn, t.SCALER):
            return positional[0].value, False
        return None

    def kind_is(self, node: cst.BaseExpression | None, fn: Function, kind: str) -> bool:
        """Whether `node` holds an optimizer, a scheduler or a scaler: by how it was
        built in the file, else by its name (`self.opt_G`, `lr_scheduler`)."""
        if node is None:
            return False
        key, held = var(node), self.holds(var(node), fn)
        if kind == t.SCHEDULER:
            return t.named_like(node, kind) or (held == kind and not t.named_like(node, t.OPTIMIZER))
        if kind == t.SCALER:
            return held == kind or t.named_like(node, kind)
        if held == kind or key in self.bindings.ever.get(kind, ()):
            return True
        return held not in (t.SCALER, t.SCHEDULER) and not t.named_like(node, t.SCALER) and (
            not self.kind_is(node, fn, t.SCHEDULER) and t.named_like(node, t.OPTIMIZER))

    def helpers(self, kind: str, per_call: bool = False) -> set[str]:
        """Names of the functions of the file that backpropagate (`BACKWARD`),
        step an optimizer (`STEP`) or clear gradients (`ZERO`), themselves or
        through such helpers; with `per_call`, outside any loop of theirs.
        Helpers are called as `f(...)` or `self.f(...)`; for clearing, any
        call of a method of that name counts (`agent.reset_gradients()`)."""
        key = ("helpers", kind, per_call)
        if key not in self._cache:
            named = [f for f in self.functions if type(f.node) is cst.FunctionDef]

            def does(site: Site) -> bool:
                if kind == ZERO:
                    return site.kind in (ZERO, GRAD) and t.clears_gradients(site.node)
                return self.is_mark(site, kind)

            found = {f.name for f in named if any(map(does, f.sites if per_call else f.all_sites()))}
            self._cache[key] = closure(found, [(f.helper_calls if per_call else f.every(
                "calls" if kind == ZERO else "helper_calls"), {f.name}) for f in named])
        return self._cache[key]

    @cached_property
    def engine_steps(self) -> list[Function]:
        """Functions handed to a training engine that runs them once per
        iteration: pytorch-ignite's `Engine(update)`, also through `partial`."""
        found = []
        for site in self.engine_sites:
            call = site.node
            if self.qualified_name(call.func, site.ctx) not in _ENGINES:
                continue
            arg = next((a.value for a in call.args if a.keyword is None and not a.star
                        or a.keyword is not None and a.keyword.value == "process_function"),
                       None)
            if type(arg) is cst.Call and self.qualified_name(arg.func, site.ctx) == \
                    "functools.partial" and arg.args:
                arg = arg.args[0].value
            found += self.defs_named(arg, site.ctx.function)
        return found

    def defs_named(self, node: cst.BaseExpression, where: Function) -> list[Function]:
        """The functions of the file `node` names where `where` runs: for `f`, the
        `def f` of the innermost function around `where` (or the module) that
        has one; for `self.f`, the methods `f` of the file's classes."""
        candidates = self.defs.get(last_name(node), ())
        if type(node) is cst.Attribute and last_name(node.value) in ("self", "cls"):
            return [f for f in candidates if type(f.parent.node) is cst.ClassDef]
        for scope in where.outward() if type(node) is cst.Name else ():
            found = [f for f in candidates if f.parent is scope]
            if found:
                return found
        return []

    # -- what names hold (`bindings`) ------------------------------------------------------
    @cached_property
    def bindings(self) -> Bindings:
        """What the names of the file hold (`Bindings`: `holds`, `ever`, `models` ...)."""
        return Bindings(self.functions)

    def holds(self, key: str | None, fn: Function) -> str | None:
        """What `key` (`x`, `self.x`) holds in `fn` where every binding agrees: a
        kind of `training` (`OPTIMIZER`, `MODULE`, `INSTANCE` ...), or None."""
        return self.bindings.holds(key, fn)

    # -- grad modes and autocast ------------------------------------------------------
    def _own(self, ctx: Ctx, what: str) -> object:
        """What a `with`'s items or a def's decorators say about gradients or
        autocast (the last one that says anything), or None."""
        if ctx.kind == WITH:
            exprs = [item.item for item in ctx.node.items]
        elif ctx.kind == FUNCTION:
            exprs = [d.decorator for d in ctx.node.decorators]
        else:
            return None
        fn = ctx.parent.function
        found = None
        for expr in exprs:
            if what == "grad":
                found = t.grad_mode(expr, fn.resolve) or self._disables_grad(expr, ctx) or found
            else:
                enabled = self._autocast(expr, fn)
                found = (ctx.node, enabled[0]) if enabled is not None else found
        return found

    def _disables_grad(self, expr: cst.BaseExpression, ctx: Ctx) -> str | None:
        """`OFF` for a call of a context manager defined in the file whose `yield`
        runs with gradients off (`@contextmanager` ... `with torch.no_grad(): yield`),
        and for a decorator defined in the file that calls the function it wraps
        with gradients off (`def nograd(f): def g(*a): with torch.no_grad(): return f(*a)`)."""
        if type(expr) is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            for fn in self.defs_named(expr.func, ctx.function):
                if fn is not ctx.function and any(
                        last_name(d.decorator) == "contextmanager" for d in fn.node.decorators) \
                        and any(y.grad == t.OFF for y in fn.yields):
                    return t.OFF
        elif type(expr) is cst.Name and ctx.kind == FUNCTION:
            for fn in self.defs_named(expr, ctx.function):
                if fn is not ctx.function and _wraps_without_grad(fn):
                    return t.OFF
        return None

    def _autocast(self, expr: cst.BaseExpression, fn: Function) -> "tuple[bool | None] | None":
        """(enabled,) when `expr` makes an autocast context: a call, a variable or
        attribute holding one, or a call of a `partial` of one."""
        kind = t.value_kind(expr, fn.resolve, self.bindings.classes)
        if kind is None and type(expr) in (cst.Name, cst.Attribute):  # `ctx = autocast(...)`
            kind = t.AUTOCAST if self.bindings.may_hold(var(expr), fn, t.AUTOCAST) else self.holds(
                var(expr), fn)
        elif kind is None and type(expr) is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            kind = t.AUTOCAST if self.bindings.may_hold(var(expr.func), fn, t.AUTOCAST_MAKER) else None
        if kind == t.AUTOCAST and type(expr) is cst.Call and fn.resolve(expr.func):
            return (t.autocast_enabled(expr, fn.resolve(expr.func)),)
        return (kind == t.AUTOCAST,) if kind in (t.AUTOCAST, t.AUTOCAST_OFF) else None

    # -- the walk -----------------------------------------------------------------------
    path = staticmethod(path)
    scan = staticmethod(scan)

    def get_visitors(self) -> dict[str, Callable[[cst.CSTNode], None]]:
        """`visit_<Node>`/`leave_<Node>` hooks, from `_OPENS` and the `_visit_<Node>`
        methods; with --timings, each one timed as "semantic model"."""
        methods = {f"visit_{name}": self._open for name in _OPENS}
        methods.update({f"leave_{name}": self._close for name in _OPENS})
        methods.update({f"visit_{name[7:]}": getattr(self, name) for name in _HOOKS})
        if self.timings is None:
            return methods
        return {name: MethodType(_timed(method), self) for name, method in methods.items()}

    def _open(self, node: cst.CSTNode) -> None:
        kind, here = _OPENS[type(node).__name__], self.here
        if kind in (FUNCTION, LAMBDA, CLASS):
            function = Function(node, here.function, self.names.scopes[-1], self)
            function.ctx = self.here = self._contexts[id(node)] = Ctx(here, node, kind, function, None)
            self.functions.append(function)
            if kind == FUNCTION:
                self.defs.setdefault(node.name.value, []).append(function)
            return
        loop = here.loop
        if kind == LOOP:
            loop = Loop(node, here.loop, here.function)
            here.function.loops.append(loop)
            loop.ctx = Ctx(here, node, kind, here.function, loop)
        self.here = loop.ctx if kind == LOOP else Ctx(here, node, kind, here.function, loop)
        if kind in (LOOP, WITH):  # contexts rules look up
            self._contexts[id(node)] = self.here

    def _close(self, node: cst.CSTNode) -> None:
        self.here = self.here.parent

    def _visit_Module(self, node: cst.Module) -> None:
        function = Function(node, None, self.names.scopes[-1], self)
        function.ctx = self.here = self._contexts[id(node)] = Ctx(None, node, MODULE, function, None)
        self.functions.append(function)

    def _visit_Yield(self, node: cst.Yield) -> None:
        self.here.function.yields.append(self.here)

    def _mark(self, node: cst.CSTNode, kind: str) -> None:
        site, here = self.site(node, kind), self.here
        if kind == ENGINE:
            self.engine_sites.append(site)
        else:
            (here.loop if here.loop is not None else here.function).sites.append(site)

    def _visit_Call(self, node: cst.Call) -> None:
        func = node.func
        kind = type(func)
        if kind is cst.Attribute:
            name, receiver = func.attr.value, func.value
            helper = type(receiver) is cst.Name and receiver.value in ("self", "cls")
        elif kind is cst.Name:
            name, helper = func.value, True
        else:
            return
        here = self.here
        body = here.loop if here.loop is not None else here.function
        body.calls.add(name)
        if (name[-1:] == "_" and name[-2:] != "__") or any(
                a.keyword is not None and a.keyword.value == "out" for a in node.args):
            here.function.writes = True
        if helper:
            body.helper_calls.add(name)
        mark = _MARKS.get(name)
        if mark is None:
            if kind is cst.Attribute and name[-1:] == "_" and t.on_grad(func.value):
                mark = GRAD  # `p.grad.zero_()`, `p.grad.copy_(g)`
            elif "grad" in name and t.clears_gradients(node):
                mark = ZERO
            elif "ackward" in name:
                mark = BACKPROP  # `backward_G()`, `self.manual_backward_step(...)`
            else:
                return
        self._mark(node, mark)

    def _visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            kind = type(target.target)
            if kind is cst.Subscript or (kind is cst.Attribute and target.target.attr.value == "data"):
                self.here.function.writes = True
        if any(t.on_grad(target.target) for target in node.targets):
            self._mark(node, GRAD)  # `p.grad = None`, `p.grad = g`

    def _visit_AnnAssign(self, node: cst.AnnAssign | cst.AugAssign) -> None:
        if t.on_grad(node.target):
            self._mark(node, GRAD)

    def _visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.here.function.writes = True
        self._visit_AnnAssign(node)

    def _visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if type(node.target) is cst.Tuple else [node.target]
        if any(t.on_grad(getattr(target, "value", target)) for target in targets):
            self._mark(node, GRAD)


# what each node opens: a function, a loop, a comprehension or a `with` block
_OPENS = {"FunctionDef": FUNCTION, "Lambda": LAMBDA, "ClassDef": CLASS, "For": LOOP,
          "While": LOOP, "ListComp": COMPREHENSION, "SetComp": COMPREHENSION,
          "DictComp": COMPREHENSION, "GeneratorExp": COMPREHENSION, "With": WITH}


_HOOKS = tuple(name for name in vars(SemanticModel) if name.startswith("_visit_"))


def _wraps_without_grad(fn: Function) -> bool:
    """Whether `fn`, a decorator, calls the function it is given (its first
    parameter) inside a `with` that turns gradients off."""
    params = fn.node.params.params
    if not params:
        return False
    wrapped = params[0].name.value
    for node in descendants(fn.node.body):
        if type(node) is cst.With and any(
                t.grad_mode(item.item, fn.resolve) == t.OFF for item in node.items) and any(
                type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == wrapped
                for n in descendants(node.body)):
            return True
    return False


def _timed(method: Callable[[cst.CSTNode], None]) -> Callable:
    def timed(model: SemanticModel, node: cst.CSTNode) -> None:
        started = time.perf_counter()
        try:
            method(node)
        finally:
            model.timings["semantic model"] = (model.timings.get("semantic model", 0.0)
                                               + time.perf_counter() - started)
    return timed
