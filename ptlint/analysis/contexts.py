"""What the semantic model (`ptlint.analysis.semantic`) builds during the walk:
the functions of a file and their loops, the context around a node (`Ctx`),
and the nodes it marks or rules note (`Site`). Facts that need the whole file
are asked of the model through `Function.model`.
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from ptlint.analysis import training as t
from ptlint.analysis.dataflow import Event, body_of, statements
from ptlint.analysis.names import Scope, dotted
from ptlint.analysis.statements import holders, last_statement
from ptlint.analysis.walk import descendants

if TYPE_CHECKING:
    from ptlint.analysis.semantic import SemanticModel

# contexts
MODULE, FUNCTION, LAMBDA, CLASS = "module", "function", "lambda", "class"
LOOP, COMPREHENSION, WITH = "loop", "comprehension", "with"
_BARRIERS = frozenset({MODULE, FUNCTION, LAMBDA, CLASS})
# marks
BACKWARD, BACKPROP, STEP, ZERO, GRAD, ENGINE = (
    "backward", "backprop", "step", "zero", "grad", "engine")
_UNSET = object()


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
            self._line = self.ctx.function.holders.get(id(self.node))
        return self._line

    def alone(self, smalls: tuple = (cst.Expr,)) -> "tuple[cst.CSTNode, cst.CSTNode] | None":
        """(block, line) when the node is all that its line holds (the line's one
        small statement, or the value of one of `smalls`) and the line is in an
        indented block or the module: a line a fix can move or edit whole."""
        line = self.line
        if type(line) is not cst.SimpleStatementLine or len(line.body) != 1 or not (
                line.body[0] is self.node or isinstance(line.body[0], smalls)
                and line.body[0].value is self.node):
            return None
        path = self.ctx.function.model.path(line, self.ctx.function.node)
        block = path[-2] if len(path) > 1 else None
        return (block, line) if isinstance(block, (cst.IndentedBlock, cst.Module)) else None

    def periodic_within(self, loop: "Loop") -> bool:
        """Guarded, inside `loop`, by an `if` whose test looks like a schedule or a
        process guard (`step % k == 0`, `rank == 0`, or a name the loop binds to
        one: `regularize = i % k == 0`; not the `else` of `if i % k == 0:`),
        in an `except` handler, or in the body
        of an `if` that leaves the loop (it ends in `break`, `return`, `raise`
        or `sys.exit(...)`: it runs once at most). A test without `%` whose
        branch also backpropagates (`if is_train == 0:` around the whole step)
        picks a mode, not steps: that branch runs on every training step."""
        path = self.ctx.function.model.path(self.node, loop.node)
        nested = False  # inside a loop within `loop`: a `break` leaves only that one
        for node, inner in zip(path, path[1:]):
            if type(node) is cst.ExceptHandler:
                return True
            if type(node) is cst.If and inner is not node.test and not (
                    inner is node.orelse and _every_kth(node.test)) and (  # every other step
                    _scheduled_name(node.test, loop.node)
                    or t.schedule_test(node.test) and not _mode(node.test, inner, self)
                    or inner is node.body and _leaves(node.body, not nested)):
                return True
            nested |= type(node) in (cst.For, cst.While) and node is not loop.node
        return False


def _every_kth(test: cst.BaseExpression) -> bool:
    """`step % k == 0` (nothing else): true on one step in `k`."""
    return type(test) is cst.Comparison and len(test.comparisons) == 1 and type(
        test.comparisons[0].operator) is cst.Equal and any(
        type(side) is cst.BinaryOperation and type(side.operator) is cst.Modulo
        for side in (test.left, test.comparisons[0].comparator))


# calls that end the program
EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _mode(test: cst.BaseExpression, branch: cst.CSTNode, site: Site) -> bool:
    """`if is_train == 0:` (no `%`) around a backward call of the function: the test
    picks a mode, and the branch runs on every training step."""
    if any(type(n) is cst.Modulo for n in descendants(test)):
        return False  # `if i % n_critic == 0:` trains the generator every n-th step
    backward = [s for s in site.ctx.function.all_sites() if s.kind == BACKWARD]
    inside = {id(n) for n in descendants(branch)} if backward else set()
    return any(id(s.node) in inside for s in backward)


def _leaves(block: cst.BaseSuite, breaks: bool) -> bool:
    """Whether `block` ends the loop it is in: its last statement is `return`,
    `raise`, a call of `sys.exit` (or `exit`, `quit`), or `break` (`breaks`)."""
    last = last_statement(block)
    if type(last) in (cst.Return, cst.Raise) or breaks and type(last) is cst.Break:
        return True
    return (type(last) is cst.Expr and type(last.value) is cst.Call
            and dotted(last.value.func) in EXITS)


def _scheduled_name(test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """`if flag:` where `loop` assigns `flag = <a schedule test>`; also `flag and x`,
    and `flag or other` where both are flags or schedule tests."""
    if type(test) is cst.BooleanOperation:
        sides = [_scheduled_name(side, loop) or t.schedule_test(side)
                 for side in (test.left, test.right)]
        return any(sides) if type(test.operator) is cst.And else all(sides)
    if type(test) is not cst.Name:
        return False
    return any(type(node) is cst.Assign and len(node.targets) == 1
               and type(node.targets[0].target) is cst.Name
               and node.targets[0].target.value == test.value and t.schedule_test(node.value)
               for node in descendants(loop))


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
        return self._inherited("_grad", "grad")

    @property
    def autocast(self) -> "tuple[cst.CSTNode, bool | None] | None":
        """The innermost autocast region in the function: (its `with` or def,
        its `enabled`: a literal's value, True when absent, None when not a
        literal), or None."""
        return self._inherited("_autocast", "autocast")

    def _inherited(self, slot: str, what: str):
        """What this context says about `what`, else what the one around it says."""
        found = getattr(self, slot)
        if found is _UNSET:
            found = self.function.model._own(self, what)
            if found is None and self.kind not in _BARRIERS:
                found = getattr(self.parent, what)
            setattr(self, slot, found)
        return found

    def hot_loop(self) -> "Loop | None":
        """The nearest hot loop among those around this context."""
        loops = self.loop.outward() if self.loop is not None else ()
        return next((loop for loop in loops if loop.hot), None)


class _Body:
    ctx: Ctx

    def __init__(self, node: cst.CSTNode, function: "Function | None") -> None:
        self.node, self.function = node, function
        self.sites: list[Site] = []  # marks directly here, in order
        self.calls: set[str] = set()  # last names of every callee called directly here
        self.helper_calls: set[str] = set()  # `f(...)`, `self.f(...)`: maybe defined here

    def outward(self) -> Iterator:
        """This loop (or function) and the loops (functions) around it, innermost first."""
        body = self
        while body is not None:
            yield body
            body = body.parent


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

    @cached_property
    def events(self) -> list[Event]:
        """The loop's statements in order, its header first (see `dataflow.statements`)."""
        return list(statements((self.node,)))

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
        chain = list(self.outward())
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

    @cached_property
    def events(self) -> list[Event]:
        """The body's statements in order (see `dataflow.statements`)."""
        return [] if type(self.node) is cst.Lambda else list(statements(body_of(self.node)))

    @cached_property
    def holders(self) -> dict[int, cst.CSTNode]:
        """The statement that holds each node of the body (see `statements.holders`);
        a lambda's nodes are in a statement of the function around it."""
        return self.parent.holders if type(self.node) is cst.Lambda else holders(body_of(self.node))

    def all_sites(self) -> list[Site]:
        """The marks of the function, in its loops too, in order."""
        return sorted([*self.sites, *(s for loop in self.loops for s in loop.sites)],
                      key=lambda s: s.order)

    def every(self, calls: str) -> set[str]:
        """`calls` or `helper_calls` of the function, in its loops too."""
        return getattr(self, calls).union(*(getattr(loop, calls) for loop in self.loops))

    def resolve(self, node: cst.CSTNode) -> str | None:
        return self.model.names.qualified_name(node, self.scope)


