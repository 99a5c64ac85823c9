"""Training-loop analysis shared by the rules that care about "every step".

A *training loop* is a `for`/`while` loop whose body calls `.backward()` and
an optimizer step. Rules that flag work done "every step" (host syncs, cache
flushes, retained graphs) need to know, for a node inside loops, whether the
loop it runs in is such a loop and whether the node only runs on some
iterations (a logging branch). Both are only known once the whole loop has
been seen, so `LoopAwareRule` keeps a tree of loop frames and hands the rule
its deferred items when the outermost loop of a function ends.

Definitions (documented in the rules that use them):

- a loop *directly* contains a node when no other loop, function, lambda or
  class lies between them;
- a loop is *hot* when it directly contains a backward call or an optimizer
  step, and the loop or one of its enclosing loops (in the same function)
  contains both;
- a node is *periodic* relative to a loop when an `if` inside that loop whose
  test looks like a schedule (`%`, `==`/`!=`, or a logging-ish name such as
  `log_interval`, `verbose`, `rank`) guards it, or it sits in an `except`
  handler.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

import libcst as cst

from ptlint.rule import Rule
from ptlint.analysis.walk import descendants

# -- names used as data-flow keys ----------------------------------------------

def key_of(node: cst.BaseExpression) -> str | None:
    """The data-flow key of a name or attribute chain: `loss` for `loss` and
    `loss.data`, `self.loss` for `self.loss.data`; None for anything else."""
    chain = []
    while isinstance(node, cst.Attribute):
        chain.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    if node.value == "self" and chain:
        return f"self.{chain[-1]}"
    return node.value


# calls whose result no longer carries the tensor (a Python value, or metadata)
SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
_META_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "ndimension",
                           "get_device", "is_contiguous", "data_ptr", "stride"})
_META_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad",
                         "grad_fn", "is_leaf", "names", "layout"})
_PY_CONVERSIONS = frozenset({"builtins.float", "builtins.int", "builtins.bool", "builtins.len",
                             "builtins.str", "builtins.repr", "builtins.isinstance",
                             "builtins.type", "builtins.id"})


class _Keys(cst.CSTVisitor):
    """Keys of the values an expression reads, skipping callees and, when
    `stop_at_host` is set, whatever ends up as a host value (`.item()`,
    `float(...)`, `.shape`)."""

    def __init__(self, resolve, stop_at_host: bool) -> None:
        self.keys: set[str] = set()
        self.bare: set[str] = set()  # names read as themselves, not as `name.attr`
        self.resolve = resolve
        self.stop = stop_at_host

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if self.stop:
            if isinstance(func, cst.Attribute) and func.attr.value in SYNC_METHODS | _META_METHODS:
                return False
            if self.resolve is not None and self.resolve(func) in _PY_CONVERSIONS:
                return False
            name = _last(func)
            if name != "Variable" and (name in _FACTORIES or name.endswith("Tensor")):
                return False  # a new tensor: the arguments only shape it
        if isinstance(func, cst.Attribute):
            # the receiver is read (not the method name), unless it is a module: `torch.sum`
            imported = self.resolve is not None and isinstance(func.value, (cst.Name, cst.Attribute)) \
                and _is_import(self.resolve(func.value))
            if not imported:
                func.value.visit(self)
        elif not isinstance(func, cst.Name):
            func.visit(self)
        for arg in node.args:
            arg.value.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self.stop and node.attr.value in _META_ATTRS:
            return False
        key = key_of(node)
        if key is not None:
            self.keys.add(key)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value not in ("True", "False", "None"):
            self.keys.add(node.value)
            self.bare.add(node.value)
        return False


def _is_import(qualified: str | None) -> bool:
    return qualified is not None and not qualified.startswith("builtins.")


def value_keys(node: cst.CSTNode | None, resolve=None, *, stop_at_host: bool = False) -> set[str]:
    return _read(node, resolve, stop_at_host).keys


def _read(node: cst.CSTNode | None, resolve, stop_at_host: bool) -> _Keys:
    visitor = _Keys(resolve, stop_at_host)
    if node is not None:
        node.visit(visitor)
    return visitor


def target_keys(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= target_keys(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return target_keys(target.value)
    if isinstance(target, cst.Subscript):
        return target_keys(target.value)
    key = key_of(target)
    return {key} if key else set()


# -- what a training step looks like -----------------------------------------

_OPTIMIZER = re.compile(r"opt(?!ion)", re.I)


def is_backward_call(call: cst.Call) -> bool:
    """`x.backward(...)`, `scaler.scale(x).backward()`, `accelerator.backward(x)`,
    `self.manual_backward(x)`, `torch.autograd.backward(x)`."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward")


def is_backprop_call(call: cst.Call) -> bool:
    """Any call that may backpropagate through a graph: a backward call,
    `torch.autograd.grad(...)`, or a helper named like one (`backward_G()`)."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else (
        func.value if isinstance(func, cst.Name) else "")
    return "backward" in name.lower() or name == "grad"


def is_optimizer_step(call: cst.Call) -> bool:
    """`optimizer.step()`, `opt_G.step()`, `scaler.step(optimizer)`,
    `xm.optimizer_step(optimizer)`."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "optimizer_step":
        return True
    if func.attr.value != "step":
        return False
    receiver = key_of(func.value)
    if receiver is None:
        return False
    last = _last(func.value)
    if "sched" in last.lower():
        return False
    if _OPTIMIZER.search(last):
        return True
    if "scaler" in last.lower():
        return True
    return any(
        key_of(a.value) is not None and _OPTIMIZER.search(_last(a.value)) for a in call.args
    )


def _last(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return ""


def loss_keys(call: cst.Call) -> set[str]:
    """The keys of what a backward call differentiates."""
    func = call.func
    assert isinstance(func, cst.Attribute)
    plain = [a for a in call.args if a.keyword is None and not a.star]
    keys: set[str] = set()
    if plain:
        keys |= value_keys(plain[0].value)
    if not plain or key_of(func.value) is None:
        keys |= value_keys(func.value)
    return keys


_SCHEDULE_NAME = re.compile(
    r"log|print|verbose|display|report|interval|freq|every|debug|writer|tensorboard|wandb|"
    r"visual|vis_|plot|sample|save|eval|val|test", re.I)
_PROCESS_NAME = re.compile(r"rank|master|main|zero|local|world", re.I)


def is_schedule_test(test: cst.BaseExpression) -> bool:
    """Whether an `if` test looks like "only on some steps"."""
    for node in descendants(test):
        kind = type(node)
        if kind is cst.BinaryOperation:
            if type(node.operator) is cst.Modulo:
                return True
        elif kind is cst.Comparison:
            # `i == len(loader) - 1` runs once; `rank == 0` runs every step on rank 0
            if any(type(t.operator) in (cst.Equal, cst.NotEqual) for t in node.comparisons) \
                    and not _PROCESS_NAME.search(cst.Module([]).code_for_node(node)):
                return True
        elif kind is cst.Name:
            if _SCHEDULE_NAME.search(node.value):
                return True
    return False


# -- the loop tree -------------------------------------------------------------

@dataclass(eq=False)
class LoopFrame:
    node: cst.CSTNode
    parent: "LoopFrame | None"
    direct_backward: bool = False
    direct_step: bool = False
    any_backward: bool = False
    any_step: bool = False
    children: list["LoopFrame"] = field(default_factory=list)
    # every assignment anywhere inside this loop
    assigns: list["Assignment"] = field(default_factory=list)
    losses: set[str] = field(default_factory=set)
    backprops: list[int] = field(default_factory=list)  # order numbers of backprop calls
    items: list[Any] = field(default_factory=list)

    def ancestors(self) -> Iterator["LoopFrame"]:
        frame = self.parent
        while frame is not None:
            yield frame
            frame = frame.parent

    @property
    def hot(self) -> bool:
        if not (self.direct_backward or self.direct_step):
            return False
        chain = [self, *self.ancestors()]
        return any(f.any_backward for f in chain) and any(f.any_step for f in chain)

    def hot_frame(self) -> "LoopFrame | None":
        """The nearest hot loop among this one and its enclosing loops."""
        for frame in (self, *self.ancestors()):
            if frame.hot:
                return frame
        return None

    def walk(self) -> Iterator["LoopFrame"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def contains(self, other: "LoopFrame") -> bool:
        return other is self or self in other.ancestors()


@dataclass(eq=False)
class Assignment:
    targets: set[str]  # keys assigned
    reads: set[str]  # keys read by the value, not counting host values (`.item()`, `.shape`)
    host: bool  # the value is a Python object: `x.item()`, `float(x)`
    move: bool  # an input: a name moved or reshaped (`x.to(device)`), or a factory's tensor
    fresh: bool = False  # a factory's new tensor (`torch.randn(...)`): no graph behind it
    bare: set[str] = field(default_factory=set)  # the reads that are plain names
    # tensor arithmetic only: operators, torch functions and methods called on
    # `receivers` (no model, loss function or helper is called)
    arithmetic: bool = False
    receivers: set[str] = field(default_factory=set)


@dataclass(eq=False)
class Guard:
    """An `if` branch or `except` handler between a node and its loops."""

    frame: LoopFrame | None  # innermost loop the guard is inside
    periodic: bool


@dataclass(eq=False)
class Deferred:
    """What a rule noted inside a loop, decided when the loop tree is complete."""

    node: cst.CSTNode
    frame: LoopFrame
    guards: tuple[Guard, ...]
    order: int
    data: Any = None

    def periodic_within(self, frame: LoopFrame) -> bool:
        """Guarded by a schedule-like `if` (or an `except`) inside `frame`."""
        return any(g.periodic and g.frame is not None and frame.contains(g.frame)
                   for g in self.guards)


class LoopAwareRule(Rule):
    """A rule that sees the loop tree. Subclasses call `self.defer(node, data)`
    while visiting and receive the finished loop tree in `resolve_loops(root)` once
    the outermost loop of the function ends. Subclasses that define any of the
    hooks below must call `super()`."""

    track_assignments = False

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: list[LoopFrame] = []
        self._saved: list[tuple[list[LoopFrame], list[Guard]]] = []
        self._guards: list[Guard] = []
        self._order = 0

    # -- for subclasses ------------------------------------------------------
    @property
    def loop(self) -> LoopFrame | None:
        return self._frames[-1] if self._frames else None

    def defer(self, node: cst.CSTNode, data: Any = None) -> None:
        frame = self.loop
        if frame is not None:
            self._order += 1
            frame.items.append(Deferred(node, frame, tuple(self._guards), self._order, data))

    def resolve_loops(self, root: LoopFrame) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- loops ---------------------------------------------------------------
    def _enter_loop(self, node: cst.CSTNode) -> None:
        parent = self.loop
        frame = LoopFrame(node, parent)
        if parent is not None:
            parent.children.append(frame)
        self._frames.append(frame)

    def _leave_loop(self, node: cst.CSTNode) -> None:
        frame = self._frames.pop()
        parent = self.loop
        if parent is not None:
            parent.any_backward |= frame.any_backward
            parent.any_step |= frame.any_step
            parent.assigns.extend(frame.assigns)
            parent.losses |= frame.losses
            parent.backprops.extend(frame.backprops)
        else:
            self.resolve_loops(frame)

    def visit_For(self, node: cst.For) -> None:
        self._enter_loop(node)
        if self.track_assignments:  # the loop variable is new data every iteration
            self.loop.assigns.append(Assignment(target_keys(node.target), set(), False, True, True))

    def leave_For(self, node: cst.For) -> None:
        self._leave_loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._enter_loop(node)

    def leave_While(self, node: cst.While) -> None:
        self._leave_loop(node)

    # -- function barriers ---------------------------------------------------
    def _push_scope(self, node: cst.CSTNode) -> None:
        self._saved.append((self._frames, self._guards))
        self._frames, self._guards = [], []

    def _pop_scope(self, node: cst.CSTNode) -> None:
        self._frames, self._guards = self._saved.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._push_scope(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._pop_scope(node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push_scope(node)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._pop_scope(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._push_scope(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._pop_scope(node)

    # -- guards --------------------------------------------------------------
    # (one method each: LibCST drops visitor methods whose `__name__` differs)
    def visit_If_body(self, node: cst.If) -> None:
        self._guards.append(Guard(self.loop, is_schedule_test(node.test)))

    def leave_If_body(self, node: cst.If) -> None:
        self._periodic = self._guards.pop().periodic

    def visit_If_orelse(self, node: cst.If) -> None:  # right after leave_If_body
        self._guards.append(Guard(self.loop, self._periodic))

    def leave_If_orelse(self, node: cst.If) -> None:
        self._guards.pop()

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._guards.append(Guard(self.loop, True))

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._guards.pop()

    # -- what happens in the loop ---------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        frame = self.loop
        if frame is None:
            return
        if is_backprop_call(node):
            self._order += 1
            frame.backprops.append(self._order)
        if is_backward_call(node):
            frame.direct_backward = frame.any_backward = True
            frame.losses |= loss_keys(node)
        elif is_optimizer_step(node):
            frame.direct_step = frame.any_step = True

    def _assign(self, targets: list[cst.BaseExpression], value: cst.BaseExpression | None) -> None:
        frame = self.loop
        if frame is None or value is None or not self.track_assignments:
            return
        resolve = self.qualified_name
        if (len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List))
                and isinstance(value, (cst.Tuple, cst.List))
                and len(targets[0].elements) == len(value.elements)):
            for t, v in zip(targets[0].elements, value.elements):
                self._assign([t.value], v.value)
            return
        lhs: set[str] = set()
        for target in targets:
            lhs |= target_keys(target)
        reads = _read(value, resolve, True)
        arithmetic, receivers = _arithmetic(value, resolve)
        frame.assigns.append(Assignment(lhs, reads.keys, is_host_value(value, resolve),
                                        is_data_move(value), is_fresh(value), reads.bare,
                                        arithmetic, receivers))

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign([t.target for t in node.targets], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        # `total += x` reads `total` as well
        self._assign([node.target], cst.BinaryOperation(node.target, cst.Add(), node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assign([node.target], node.value)


def _arithmetic(value: cst.BaseExpression, resolve) -> tuple[bool, set[str]]:
    """Whether `value` only does tensor arithmetic (operators, `torch.*`
    functions, methods), and the keys of the receivers of its method calls."""
    receivers: set[str] = set()
    foreign = False

    class _V(cst.CSTVisitor):
        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal foreign
            func = node.func
            qualified = resolve(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
            if qualified is not None and (qualified.startswith("torch.") or qualified in _PY_CONVERSIONS
                                          or qualified.startswith("builtins.")):
                return
            if isinstance(func, cst.Attribute):
                root = func.value
                while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
                    root = root.func if isinstance(root, cst.Call) else root.value
                key = key_of(root) if isinstance(root, cst.Name) else None
                if key is not None and key != "self":
                    receivers.add(key)
                    return
            foreign = True

    value.visit(_V())
    return not foreign, receivers


def is_host_value(value: cst.BaseExpression, resolve) -> bool:
    """`x.item()`, `x.tolist()`, `float(x)`: the value is a Python object."""
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist"):
            return True
        if resolve(func) in _PY_CONVERSIONS:
            return True
    return False


_MOVE_METHODS = frozenset({
    "to", "cuda", "float", "half", "double", "long", "int", "bool", "bfloat16", "byte", "type",
    "view", "reshape", "permute", "contiguous", "squeeze", "unsqueeze", "flatten", "transpose",
    "pin_memory", "requires_grad_", "expand", "repeat", "view_as", "reshape_as", "t",
    "fill_", "zero_", "normal_", "uniform_", "random_",
})


# calls that make a fresh input tensor rather than compute from the model
_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like", "Variable", "normal",
})


def _callee(func: cst.BaseExpression) -> str:
    return _last(func)


def is_fresh(value: cst.BaseExpression) -> bool:
    """A factory's new tensor, possibly initialised: `torch.randn(n)`, `Tensor(n).fill_(1)`."""
    while isinstance(value, cst.Call):
        name = _callee(value.func)
        if name == "Variable" and value.args:
            value = value.args[0].value
        elif name in _FACTORIES or name.endswith("Tensor"):
            return True
        elif isinstance(value.func, cst.Attribute) and name in _MOVE_METHODS:
            value = value.func.value
        else:
            return False
    return False


def is_data_move(value: cst.BaseExpression) -> bool:
    """An input, not a computation: a name moved, cast, reshaped or indexed
    (`x.to(device)`, `batch[0].cuda().float()`, `Variable(x)`), or a fresh
    tensor from a factory (`torch.randn(...)`, `LongTensor(labels)`)."""
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(is_data_move(el.value) for el in value.elements)
    while True:
        if isinstance(value, cst.Call):
            func = value.func
            name = _callee(func)
            if isinstance(func, cst.Attribute) and name in _MOVE_METHODS:
                value = func.value
                continue
            if name in _FACTORIES or name.endswith("Tensor"):
                if name == "Variable" and value.args:
                    value = value.args[0].value
                    continue
                return True
            return False
        if isinstance(value, cst.Subscript):
            value = value.value
        elif isinstance(value, cst.Attribute) and value.attr.value == "data":
            value = value.value
        else:
            break
    return isinstance(value, (cst.Name, cst.Attribute))
