"""The semantic model of one file: what its training code does.

Modelled on ruff's `SemanticModel` and LibCST's metadata providers: one model
per file, built only when an enabled rule declares `semantic = True`, shared
by all of them, and queried instead of rebuilt by each. It is a visitor the
engine runs right after the name resolver and before every rule, so during
the walk `here` is where the walk is now (a `Ctx`: the function, loop,
`with` block, `if` branch ... around the node, innermost first) and `line`
the statement that holds it. Rules note the nodes they care about with
`site(node)` and ask their questions in `leave_Module`, once the model has
seen the whole file; the answers are computed then, on demand, and cached.

What it answers:
- the functions (and the module, class bodies and lambdas) with their bodies
  in order (`Function.events`) and their loops (`Loop`);
- marks: backward calls, optimizer steps, gradient clearing and writes, and
  other backpropagating calls (`Function.sites`, `Loop.sites`);
- which loops train (`Loop.training`: backward and an optimizer step, directly
  or through helpers defined in the file), which are hot (`Loop.hot`), and
  which functions a training engine runs once per iteration (`engine_steps`);
- the grad mode and autocast region of a context (`Ctx.grad`, `Ctx.autocast`),
  block and decorator forms, autocast held in a variable or attribute or built
  with `functools.partial`;
- what a name holds where it is known (`holds`, kinds in `training`);
- where a node sits among statements (`path`) and a path-sensitive walk over
  a body's statements (`scan`).

Names are resolved with the resolver's scopes, kept after the walk: a name
rebound after the node asked about resolves to its last binding there.
"""
from __future__ import annotations

import time
from types import MethodType
from typing import Callable, Iterator, TypeVar

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.dataflow import Event, body_of, block, last_name, statements, var
from ptlint.analysis.names import NameResolver, Scope
from ptlint.analysis.walk import Visitor, children, descendants

# contexts
MODULE, FUNCTION, LAMBDA, CLASS = "module", "function", "lambda", "class"
LOOP, COMPREHENSION, WITH = "loop", "comprehension", "with"
_BARRIERS = frozenset({MODULE, FUNCTION, LAMBDA, CLASS})
# marks
BACKWARD, BACKPROP, STEP, ZERO, GRAD, ENGINE = (
    "backward", "backprop", "step", "zero", "grad", "engine")
_MARKS = {"backward": BACKWARD, "manual_backward": BACKWARD, "step": STEP,
          "optimizer_step": STEP, "grad": BACKPROP, "Engine": ENGINE,
          "DeterministicEngine": ENGINE}
_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine",
                      "ignite.engine.DeterministicEngine",
                      "ignite.engine.deterministic.DeterministicEngine"})
_ENDS_PATH = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_UNSET = object()
S = TypeVar("S")


class Site:
    """A node as the walk saw it: what it is (a mark kind, or None for a node
    a rule noted), its context, its order in the file; `line` is the statement
    that holds it (a simple statement line or suite, or the compound statement
    whose header it is in), found on demand."""

    __slots__ = ("node", "kind", "ctx", "order", "_line")

    def __init__(self, node, kind, ctx, order) -> None:
        self.node, self.kind, self.ctx, self.order, self._line = node, kind, ctx, order, _UNSET

    @property
    def line(self) -> cst.CSTNode | None:
        if self._line is _UNSET:
            self._line = self.ctx.function.model._holders(self.ctx.function).get(id(self.node))
        return self._line

    def periodic_within(self, loop: "Loop") -> bool:
        """Guarded, inside `loop`, by an `if` whose test looks like a schedule or a
        process guard (`step % k == 0`, `rank == 0`), or in an `except` handler."""
        path = self.ctx.function.model.path(self.node, loop.node)
        for node, inner in zip(path, path[1:]):
            if type(node) is cst.ExceptHandler or (type(node) is cst.If and inner is not node.test
                                                   and t.schedule_test(node.test)):
                return True
        return False


class Ctx:
    """One level of nesting around a node; `parent` is the next one out."""

    __slots__ = ("parent", "node", "kind", "function", "loop", "_grad", "_autocast")

    def __init__(self, parent: "Ctx | None", node: cst.CSTNode, kind: str,
                 function: "Function", loop: "Loop | None") -> None:
        self.parent, self.node, self.kind = parent, node, kind
        self.function, self.loop = function, loop
        self._grad = self._autocast = _UNSET

    def up(self) -> Iterator["Ctx"]:
        """This context and those around it, up to its function (included)."""
        ctx: Ctx | None = self
        while ctx is not None:
            yield ctx
            if ctx.kind in _BARRIERS:
                return
            ctx = ctx.parent

    def innermost(self, *kinds: str) -> "Ctx | None":
        return next((c for c in self.up() if c.kind in kinds), None)

    @property
    def grad(self) -> str | None:
        """`training.OFF`, `ON` or `MAYBE` where a `with` or a decorator sets the
        grad mode here; None where nothing in the function does."""
        if self._grad is _UNSET:
            self._grad = self.function.model._own(self, "grad")
            if self._grad is None and self.kind not in _BARRIERS:
                self._grad = self.parent.grad
        return self._grad

    @property
    def autocast(self) -> "tuple[cst.CSTNode, bool | None] | None":
        """The innermost autocast region in the function: (its `with` or def,
        its `enabled`: a literal's value, True when absent, None when not a
        literal), or None."""
        if self._autocast is _UNSET:
            self._autocast = self.function.model._own(self, "autocast")
            if self._autocast is None and self.kind not in _BARRIERS:
                self._autocast = self.parent.autocast
        return self._autocast

    def hot_loop(self) -> "Loop | None":
        """The nearest hot loop among those around this context."""
        loop = self.loop
        while loop is not None and not loop.hot:
            loop = loop.parent
        return loop


class _Body:
    ctx: Ctx

    def __init__(self, node: cst.CSTNode, function: "Function | None") -> None:
        self.node, self.function = node, function
        self.sites: list[Site] = []  # marks directly here, in order
        self.calls: set[str] = set()  # last names of every callee called directly here
        self.helper_calls: set[str] = set()  # `f(...)`, `self.f(...)`: maybe defined here
        self._events: list[Event] | None = None


class Loop(_Body):
    """A `for` or `while` loop of a function."""

    def __init__(self, node, parent: "Loop | None", function: "Function") -> None:
        super().__init__(node, function)
        self.parent = parent
        self.children: list[Loop] = []
        if parent is not None:
            parent.children.append(self)

    def walk(self) -> Iterator["Loop"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def ancestors(self) -> Iterator["Loop"]:
        loop = self.parent
        while loop is not None:
            yield loop
            loop = loop.parent

    def contains(self, other: "Loop | None") -> bool:
        while other is not None and other is not self:
            other = other.parent
        return other is self

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            self._events = list(statements((self.node,)))
        return self._events

    def does(self, kind: str, direct: bool = False) -> bool:
        """Whether the loop backpropagates (`BACKWARD`) or steps an optimizer
        (`STEP`): itself, in a nested loop unless `direct`, or through a helper
        defined in the file (one that does it on every call, when `direct`)."""
        key = (kind, direct)
        found = self.__dict__.get(key)
        if found is None:
            model = self.function.model
            helpers = model.helpers(kind, per_call=direct)
            found = any(model.is_mark(s, kind) for s in self.sites) or bool(
                self.helper_calls & helpers) or (not direct and any(
                    c.does(kind) for c in self.children))
            self.__dict__[key] = found
        return found

    @property
    def training(self) -> bool:
        """Backpropagates and steps an optimizer (directly or through helpers)."""
        return self.does(BACKWARD) and self.does(STEP)

    @property
    def hot(self) -> bool:
        """Itself backpropagates or steps (not only in a nested loop), and it or a
        loop around it does both: the loop whose iterations are training steps."""
        if not (self.does(BACKWARD, direct=True) or self.does(STEP, direct=True)):
            return False
        chain = [self, *self.ancestors()]
        return any(c.does(BACKWARD) for c in chain) and any(c.does(STEP) for c in chain)


class Function(_Body):
    """A def, lambda, class body or the module; `sites`, `calls` and
    `helper_calls` are those outside its loops (see `all_sites`)."""

    def __init__(self, node, parent: "Function | None", scope: Scope,
                 model: "SemanticModel") -> None:
        super().__init__(node, self)
        self.parent, self.scope, self.model = parent, scope, model
        self.loops: list[Loop] = []
        self.yields: list[Ctx] = []
        # something is changed in place: `x += y`, `x[i] = y`, `p.data = y`, `x.add_(y)`, `out=`
        self.writes = False
        self.name = node.name.value if type(node) in (cst.FunctionDef, cst.ClassDef) else None

    @property
    def events(self) -> list[Event]:
        """The body's statements in order (see `dataflow.statements`)."""
        if self._events is None:
            self._events = [] if type(self.node) is cst.Lambda else list(
                statements(body_of(self.node)))
        return self._events

    def all_sites(self) -> list[Site]:
        """The marks of the function, in its loops too, in order."""
        return sorted([*self.sites, *(s for loop in self.loops for s in loop.sites)],
                      key=lambda s: s.order)

    def every(self, calls: str) -> set[str]:
        """`calls` or `helper_calls` of the function, in its loops too."""
        return getattr(self, calls).union(*(getattr(loop, calls) for loop in self.loops))

    def resolve(self, node: cst.CSTNode) -> str | None:
        return self.model.names.qualified_name(node, self.scope)


def _bound(event: str, node: cst.CSTNode) -> list[cst.BaseExpression]:
    if event == "for":
        return [node.target]
    if event == "with":
        return [item.asname.name for item in node.items if item.asname]
    if event == "handler":
        return [node.name.name] if node.name else []
    return [node.name] if event == "def" else []


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
            return t.is_scheduler_name(node) or (held == kind and not t.is_optimizer_name(node))
        if kind == t.SCALER:
            return held == kind or t.is_scaler_name(node)
        if held == kind or key in self.keys_holding(kind):
            return True
        return held not in (t.SCALER, t.SCHEDULER) and not t.is_scaler_name(node) and (
            not self.kind_is(node, fn, t.SCHEDULER) and t.is_optimizer_name(node))

    def helpers(self, kind: str, per_call: bool = False) -> set[str]:
        """Names of the functions of the file that backpropagate (`BACKWARD`),
        step an optimizer (`STEP`) or clear gradients (`ZERO`), themselves or
        through such helpers; with `per_call`, outside any loop of theirs.
        Helpers are called as `f(...)` or `self.f(...)`; for clearing, any
        call of a method of that name counts (`agent.reset_gradients()`)."""
        key = ("helpers", kind, per_call)
        if key in self._cache:
            return self._cache[key]
        named = [f for f in self.functions if type(f.node) is cst.FunctionDef]

        def does(site: Site) -> bool:
            if kind == ZERO:
                return site.kind in (ZERO, GRAD) and t.clears_gradients(site.node)
            return self.is_mark(site, kind)

        found = {f.name for f in named if any(map(does, f.sites if per_call else f.all_sites()))}
        calls = {f: f.helper_calls if per_call else f.every(
            "calls" if kind == ZERO else "helper_calls") for f in named}
        changed = True
        while changed:  # helpers that call helpers
            changed = False
            for f in named:
                if f.name not in found and calls[f] & found:
                    found.add(f.name)
                    changed = True
        self._cache[key] = found
        return found

    def engine_steps(self) -> list[Function]:
        """Functions handed to a training engine that runs them once per
        iteration: pytorch-ignite's `Engine(update)`, also through `partial`."""
        if "engines" not in self._cache:
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
            self._cache["engines"] = found
        return self._cache["engines"]

    def defs_named(self, node: cst.BaseExpression, where: Function) -> list[Function]:
        """The functions of the file `node` names where `where` runs: for `f`, the
        `def f` of the innermost function around `where` (or the module) that
        has one; for `self.f`, the methods `f` of the file's classes."""
        candidates = self.defs.get(last_name(node), ())
        if type(node) is cst.Attribute and last_name(node.value) in ("self", "cls"):
            return [f for f in candidates if type(f.parent.node) is cst.ClassDef]
        scope: Function | None = where if type(node) is cst.Name else None
        while scope is not None:
            found = [f for f in candidates if f.parent is scope]
            if found:
                return found
            scope = scope.parent
        return []

    # -- what names hold ------------------------------------------------------------
    def holds(self, key: str | None, fn: Function) -> str | None:
        """What `key` (`x`, `self.x`) holds in `fn` where every binding agrees: a
        kind of `training` (`OPTIMIZER`, `MODULE`, ...), or None. A plain name
        is looked up in `fn`, then in the functions around it; an attribute
        chain file-wide."""
        found = self._bindings(key, fn)
        return next(iter(found)) if found is not None and len(found) == 1 else None

    def may_hold(self, key: str | None, fn: Function, kind: str) -> bool:
        """Whether some binding of `key` seen from `fn` holds `kind`."""
        return kind in (self._bindings(key, fn) or ())

    def _bindings(self, key: str | None, fn: Function) -> set | None:
        if key is None:
            return None
        kinds = self._kinds()
        if "." in key:
            return kinds["attributes"].get(key)
        scope: Function | None = fn
        while scope is not None:
            if scope is fn or type(scope.node) is not cst.ClassDef:
                found = kinds[scope].get(key)
                if found is not None:
                    return found
            scope = scope.parent
        return None

    def keys_holding(self, kind: str) -> set[str]:
        """Every name or attribute chain bound to `kind` somewhere in the file."""
        return self._kinds()["ever"].get(kind, set())

    def optimized_by(self, optimizer: str | None) -> str | None:
        """The model `m` of `optimizer = Opt(m.parameters(), ...)`."""
        return self._kinds()["models"].get(optimizer)

    def classes(self) -> dict[str, str]:
        """The classes defined in the file, by name: `MODULE`, `CONTAINER` or `INSTANCE`."""
        if "classes" not in self._cache:
            found = self._cache["classes"] = {}
            for f in self.functions:
                if type(f.node) is cst.ClassDef:
                    found[f.name] = t.class_kind(f.node, f.parent.resolve, found)
        return self._cache["classes"]

    def _kinds(self) -> dict:
        if "kinds" in self._cache:
            return self._cache["kinds"]
        table: dict = {"attributes": {}, "ever": {}, "models": {}}
        self._cache["kinds"] = table
        classes = self.classes()
        for fn in self.functions:
            local = table[fn] = {}
            if type(fn.node) is cst.FunctionDef:
                params = fn.node.params
                for param in (*params.posonly_params, *params.params, *params.kwonly_params,
                              params.star_arg, params.star_kwarg):
                    if isinstance(param, cst.Param):
                        local[param.name.value] = {None}
            for event, node, _ in fn.events:
                if event == "small" and type(node) in (cst.Assign, cst.AnnAssign) and node.value:
                    targets = [x.target for x in node.targets] if type(node) is cst.Assign \
                        else [node.target]
                    for target in targets:
                        self._bind(table, local, target, node.value, fn.resolve, classes)
                else:  # names bound to what the model does not know
                    for target in _bound(event, node):
                        self._bind(table, local, target, None, fn.resolve, classes)
        return table

    def _bind(self, table, local, target, value, resolve, classes) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) and len(
                value.elements) == len(target.elements) else None
            whole = None if value is None or values else self._value(
                table, local, value, resolve, classes)
            for i, element in enumerate(target.elements):
                if values is not None:
                    self._bind(table, local, element.value, values[i].value, resolve, classes)
                else:  # `cls_loss, loc_loss = criterion(...)`: each one is a loss
                    kind = whole if whole == t.LOSS else None
                    self._bind_kind(table, local, element.value, kind)
            return
        kind = None if value is None else self._value(table, local, value, resolve, classes)
        self._bind_kind(table, local, target, kind)
        if kind == t.OPTIMIZER and type(value) is cst.Call and value.args \
                and type(value.args[0].value) is cst.Call:
            first = value.args[0].value
            if last_name(first.func) == "parameters" and type(first.func) is cst.Attribute:
                table["models"][var(target)] = var(first.func.value)

    def _value(self, table, local, value, resolve, classes) -> str | None:
        kind = t.value_kind(value, resolve, classes)
        if kind is None and type(value) in (cst.Name, cst.Attribute):
            kind = self._kinds_of(table, local, var(value))  # an alias keeps the kind
        elif kind is None and type(value) is cst.Call and self._calls_loss(table, local, value):
            kind = t.LOSS
        return kind

    def is_loss_call(self, call: cst.Call, fn: Function) -> bool:
        """A call of a loss function: `F.cross_entropy(...)`, `nn.MSELoss()(...)`, a
        name bound to an `nn.*Loss` anywhere in the file, or named like one
        (`criterion(...)`, `self.loss_fn(...)`)."""
        if t.value_kind(call, fn.resolve, self.classes()) == t.LOSS:
            return True
        return self._calls_loss(self._kinds(), None, call)

    def _calls_loss(self, table, local, call: cst.Call) -> bool:
        key = var(call.func) if type(call.func) in (cst.Name, cst.Attribute) else None
        return key is not None and (key in table["ever"].get(t.LOSS_FN, ()) or bool(
            t.LOSS_NAME.match(key.rpartition(".")[2])))

    @staticmethod
    def _kinds_of(table, local, key) -> str | None:
        found = (table["attributes"] if "." in (key or ".") else local).get(key)
        return next(iter(found)) if found and len(found) == 1 else None

    @staticmethod
    def _bind_kind(table, local, target, kind) -> None:
        key = var(target) if type(target) in (cst.Name, cst.Attribute) else None
        if key is None:
            return
        (table["attributes"] if "." in key else local).setdefault(key, set()).add(kind)
        if kind is not None:
            table["ever"].setdefault(kind, set()).add(key)

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
        runs with gradients off (`@contextmanager` ... `with torch.no_grad(): yield`)."""
        if type(expr) is not cst.Call or type(expr.func) not in (cst.Name, cst.Attribute):
            return None
        for fn in self.defs_named(expr.func, ctx.function):
            if fn is not ctx.function and any(
                    last_name(d.decorator) == "contextmanager" for d in fn.node.decorators) \
                    and any(y.grad == t.OFF for y in fn.yields):
                return t.OFF
        return None

    def _autocast(self, expr: cst.BaseExpression, fn: Function) -> "tuple[bool | None] | None":
        """(enabled,) when `expr` makes an autocast context: a call, a variable or
        attribute holding one, or a call of a `partial` of one."""
        kind = t.value_kind(expr, fn.resolve, self.classes())
        if kind is None and type(expr) in (cst.Name, cst.Attribute):  # `ctx = autocast(...)`
            kind = t.AUTOCAST if self.may_hold(var(expr), fn, t.AUTOCAST) else self.holds(
                var(expr), fn)
        elif kind is None and type(expr) is cst.Call and type(expr.func) in (cst.Name, cst.Attribute):
            kind = t.AUTOCAST if self.may_hold(var(expr.func), fn, t.AUTOCAST_MAKER) else None
        if kind == t.AUTOCAST and type(expr) is cst.Call and fn.resolve(expr.func):
            return (t.autocast_enabled(expr, fn.resolve(expr.func)),)
        return (kind == t.AUTOCAST,) if kind in (t.AUTOCAST, t.AUTOCAST_OFF) else None

    def _holders(self, function: Function) -> dict[int, cst.CSTNode]:
        """For every node in the statements of `function` (of the function around
        it, for a lambda): the simple statement line or suite that holds it, or
        the compound statement whose header it is in."""
        while type(function.node) is cst.Lambda:
            function = function.parent
        key = ("holders", id(function))
        if key not in self._cache:
            found = self._cache[key] = {}
            pending = list(body_of(function.node))
            while pending:
                statement = pending.pop()
                kind = type(statement)
                if kind in (cst.FunctionDef, cst.ClassDef):
                    continue
                if kind in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
                    found.update((id(n), statement) for n in descendants(statement))
                    continue
                for child in children(statement):  # a header's parts, or a block
                    if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.Else,
                                          cst.ExceptHandler, cst.Finally, cst.MatchCase)):
                        pending.append(child)
                    else:
                        found.update((id(n), statement) for n in descendants(child))
        return self._cache[key]

    # -- statements -------------------------------------------------------------------
    @staticmethod
    def path(node: cst.CSTNode, root: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes from `root` down to `node` (both included), or [] when
        `node` is not under `root`: where a fix finds the blocks and statements."""
        path, pending = [root], [iter(children(root))]
        while pending:
            for child in pending[-1]:
                if child is node:
                    return [*path, child]
                path.append(child)
                pending.append(iter(children(child)))
                break
            else:
                pending.pop()
                path.pop()
        return []

    def scan(self, body, state: S, apply: Callable[[cst.CSTNode, S], S],
             join: Callable[..., S]) -> S | None:
        """Follow `state` through the statements of `body` (a suite or a list of
        statements) along every path: `apply(holder, state)` for each simple
        statement line or suite and each compound statement's header, in
        order; `join(*states)` where paths meet (only paths still alive). A
        loop's body is taken to run; `return`, `raise`, `break` and `continue`
        end a path. Returns the state after the body, or None if no path ends
        there."""
        if isinstance(body, cst.BaseSuite):
            if type(body) is cst.SimpleStatementSuite:
                return self._line(body, state, apply)
            body = body.body
        for statement in body:
            if state is None:
                return None
            state = self._statement(statement, state, apply, join)
        return state

    def _line(self, holder, state, apply):
        state = apply(holder, state)
        return None if any(isinstance(s, _ENDS_PATH) for s in holder.body) else state

    def _statement(self, statement, state, apply, join):
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            return self._line(statement, state, apply)
        if kind in (cst.FunctionDef, cst.ClassDef):
            return state
        state = apply(statement, state)  # what the header does
        scan = self.scan

        def merge(*states):
            live = [s for s in states if s is not None]
            return join(*live) if live else None

        if kind is cst.If:
            orelse = statement.orelse
            other = state if orelse is None else (
                self._statement(orelse, state, apply, join) if type(orelse) is cst.If
                else scan(orelse.body, state, apply, join))
            return merge(scan(statement.body, state, apply, join), other)
        if kind in (cst.For, cst.While):
            looped = scan(statement.body, state, apply, join)
            after = looped if looped is not None else state
            return scan(statement.orelse.body, after, apply, join) if statement.orelse else after
        if kind is cst.With:
            return scan(statement.body, state, apply, join)
        if kind in (cst.Try, cst.TryStar):
            done = scan(statement.body, state, apply, join)
            if statement.orelse is not None and done is not None:
                done = scan(statement.orelse.body, done, apply, join)
            after = merge(done, *(scan(h.body, state, apply, join) for h in statement.handlers))
            if statement.finalbody is None:
                return after
            final = scan(statement.finalbody.body, after if after is not None else state,
                         apply, join)
            return final if after is not None else None
        if kind is cst.Match:
            return merge(state, *(scan(c.body, state, apply, join) for c in statement.cases))
        return state

    # -- the walk -----------------------------------------------------------------------
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

    def _visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if t.on_grad(node.target):
            self._mark(node, GRAD)

    def _visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.here.function.writes = True
        if t.on_grad(node.target):
            self._mark(node, GRAD)

    def _visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if type(node.target) is cst.Tuple else [node.target]
        if any(t.on_grad(getattr(target, "value", target)) for target in targets):
            self._mark(node, GRAD)


# what each node opens: a function, a loop, a comprehension or a `with` block
_OPENS = {"FunctionDef": FUNCTION, "Lambda": LAMBDA, "ClassDef": CLASS, "For": LOOP,
          "While": LOOP, "ListComp": COMPREHENSION, "SetComp": COMPREHENSION,
          "DictComp": COMPREHENSION, "GeneratorExp": COMPREHENSION, "With": WITH}


_HOOKS = tuple(name for name in vars(SemanticModel) if name.startswith("_visit_"))


def _timed(method: Callable[[cst.CSTNode], None]) -> Callable:
    def timed(model: SemanticModel, node: cst.CSTNode) -> None:
        started = time.perf_counter()
        try:
            method(node)
        finally:
            model.timings["semantic model"] = (model.timings.get("semantic model", 0.0)
                                               + time.perf_counter() - started)
    return timed
