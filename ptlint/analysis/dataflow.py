"""Statements in order and the variables they read and write: the dataflow
vocabulary of the semantic model (`ptlint.analysis.semantic`).

A body is analysed as an ordered list of statement events with their
enclosing loops. Variables are named by their text: `var` names `x`,
`self.x`, and `h` for `h["k"]`; `key_of` is coarser, `loss` for `loss.data`
and `self.loss` for `self.loss.data`, for the taint analyses of hot loops.
Nothing here resolves imports: functions that need to take a `resolve`
callable (the model's `qualified_name` for the scope analysed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.analysis.walk import children, descendants

Resolve = Callable[[cst.CSTNode], "str | None"]

# (kind, node, enclosing loops, innermost last). Kinds:
#   "small"    a small statement (Assign, AugAssign, Expr, Return, ...)
#   "expr"     the test of an `if`/`while` or the subject of a `match`
#   "for"      a `for` header (its target and iter); its loops include itself
#   "with"     a `with` header, before its body; "end_with" after the body
#   "handler"  an `except` clause (its `as` name)
#   "def"      a nested function or class: only its name is bound here
Event = tuple[str, cst.CSTNode, tuple[cst.CSTNode, ...]]


def block(suite: cst.BaseSuite) -> Iterable[cst.BaseStatement]:
    """The statements of an indented block or of a one-line suite."""
    return suite.body if isinstance(suite, cst.IndentedBlock) else (suite,)


def body_of(node: cst.CSTNode) -> Iterable[cst.BaseStatement]:
    return node.body if isinstance(node, cst.Module) else block(node.body)


def statements(body: Iterable[cst.BaseStatement], loops: tuple = ()) -> Iterator[Event]:
    """The statements of a body in source order, without descending into nested
    functions and classes. A `while` test counts as inside its loop."""
    for stmt in body:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            for small in stmt.body:
                yield "small", small, loops
        elif kind is cst.For or kind is cst.While:
            inner = (*loops, stmt)
            if kind is cst.For:
                yield "for", stmt, inner
            else:
                yield "expr", stmt.test, inner
            yield from statements(block(stmt.body), inner)
            if stmt.orelse is not None:
                yield from statements(block(stmt.orelse.body), loops)
        elif kind is cst.If:
            yield "expr", stmt.test, loops
            yield from statements(block(stmt.body), loops)
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                yield from statements((orelse,), loops)
            elif orelse is not None:
                yield from statements(block(orelse.body), loops)
        elif kind is cst.With:
            yield "with", stmt, loops
            yield from statements(block(stmt.body), loops)
            yield "end_with", stmt, loops
        elif kind is cst.Try or kind is cst.TryStar:
            yield from statements(block(stmt.body), loops)
            for handler in stmt.handlers:
                yield "handler", handler, loops
                yield from statements(block(handler.body), loops)
            for part in (stmt.orelse, stmt.finalbody):
                if part is not None:
                    yield from statements(block(part.body), loops)
        elif kind is cst.Match:
            yield "expr", stmt.subject, loops
            for case in stmt.cases:
                yield from statements(block(case.body), loops)
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            yield "def", stmt, loops


def evaluated(kind: str, node: cst.CSTNode) -> cst.CSTNode:
    """What an event evaluates: a `for`'s iterable, a `with`'s context
    expressions (as one tuple), or the node itself."""
    if kind == "for":
        return node.iter
    if kind == "with":
        return cst.Tuple([cst.Element(item.item) for item in node.items])
    return node


def var(node: cst.BaseExpression | None) -> str | None:
    """The variable a target or receiver names: `x`, `self.x`, and `h` for `h["k"]`."""
    return None if node is None else dotted(var_base(node))


def var_base(node: cst.BaseExpression) -> cst.BaseExpression:
    """`h` for `h["k"]` and `h[0][1]`; any other node itself."""
    while type(node) is cst.Subscript:
        node = node.value
    return node


def assigned_pairs(target: cst.BaseExpression,
                   value: cst.BaseExpression) -> Iterator[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) pairs of `a, b = x, y` (also nested, without starred
    elements); the whole target with the whole value otherwise."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
            and len(target.elements) == len(value.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        for t, v in zip(target.elements, value.elements):
            yield from assigned_pairs(t.value, v.value)
    else:
        yield target, value


def target_vars(node: cst.BaseExpression,
                name_of: Callable[[cst.BaseExpression], str | None] = var) -> Iterator[str]:
    """The variables an assignment target binds or stores into (each element of
    a tuple or list target, named by `name_of`)."""
    if isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:  # a starred element's value is what it binds
            yield from target_vars(element.value, name_of)
    else:
        name = name_of(node)
        if name is not None:
            yield name


_CONSTANTS = (cst.SimpleString, cst.Integer, cst.Float)
_NO_CALLS_INSIDE = (cst.Lambda, cst.SimpleString, cst.Name)


def vars_in(node: cst.CSTNode | None) -> set[str]:
    """Every variable an expression mentions: names and attribute chains (with
    their base names); not keyword names nor the `.attr` of a call's result."""
    found: set[str] = set()
    stack = [node] if node is not None else []
    while stack:  # `type(x) is`: a failed isinstance against a node class is slow
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            found.add(current.value)
        elif kind is cst.Attribute:
            name = dotted(current)
            if name is not None:
                found.add(name)
                found.add(name.partition(".")[0])
            else:
                stack.append(current.value)
        elif kind is cst.Arg:
            stack.append(current.value)
        elif kind not in _CONSTANTS:
            stack.extend(children(current))
    return found


def names_in(node: cst.CSTNode | None) -> set[str]:
    """The plain names (no attribute chains) an expression mentions."""
    return {v for v in vars_in(node) if "." not in v}


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls inside `node`, outside lambdas, outermost first."""
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Call:
            yield current
        if type(current) not in _NO_CALLS_INSIDE:
            stack.extend(reversed(children(current)))


def closure(seeds: set[str], flows: list[tuple[set[str], set[str]]]) -> set[str]:
    """`seeds` plus every variable whose value flows into one of them, where a
    flow is (variables written, variables read), in any order."""
    found = set(seeds)
    changed = True
    while changed:
        changed = False
        for targets, sources in flows:
            if targets & found and not sources <= found:
                found |= sources
                changed = True
    return found


# -- keys: the coarser names of the hot-loop taint analyses -----------------------

def key_of(node: cst.BaseExpression) -> str | None:
    """`loss` for `loss` and `loss.data`, `self.loss` for `self.loss.data`;
    None for anything but a name or attribute chain."""
    parts = (dotted(node) or "").split(".")
    return None if not parts[0] else ".".join(parts[:2]) if parts[0] == "self" else parts[0]


def target_keys(target: cst.BaseExpression) -> set[str]:
    return set(target_vars(target, lambda n: key_of(var_base(n))))


# calls whose result no longer carries the tensor (a Python value, or metadata)
SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})


def sync_method(call: cst.Call) -> str | None:
    """The method through which `call` reads a tensor on the host: one of
    `SYNC_METHODS`, or `to` for a copy to the CPU (`x.to("cpu")`); else None."""
    func = call.func
    if type(func) is not cst.Attribute:
        return None
    if func.attr.value in SYNC_METHODS:
        return func.attr.value
    first = call.args[0] if call.args else None
    if func.attr.value == "to" and first is not None and (
            first.keyword is None or first.keyword.value == "device"):
        text = first.value.evaluated_value if type(first.value) is cst.SimpleString else None
        if isinstance(text, str) and text.partition(":")[0] == "cpu":
            return "to"
    return None
_META_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "ndimension",
                           "get_device", "is_contiguous", "data_ptr", "stride"})
_META_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad",
                         "grad_fn", "is_leaf", "names", "layout"})
PY_CONVERSIONS = frozenset({"builtins.float", "builtins.int", "builtins.bool", "builtins.len",
                            "builtins.str", "builtins.repr", "builtins.isinstance",
                            "builtins.type", "builtins.id"})
# calls that make a fresh input tensor rather than compute from the model
FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like", "Variable", "normal",
})
_MOVE_METHODS = frozenset({
    "to", "cuda", "float", "half", "double", "long", "int", "bool", "bfloat16", "byte", "type",
    "view", "reshape", "permute", "contiguous", "squeeze", "unsqueeze", "flatten", "transpose",
    "pin_memory", "requires_grad_", "expand", "repeat", "view_as", "reshape_as", "t",
    "fill_", "zero_", "normal_", "uniform_", "random_",
})


def last_name(node: cst.BaseExpression) -> str:
    """`optimizer` for `self.optimizer` or `optimizer`; "" for anything else."""
    if type(node) is cst.Attribute:
        return node.attr.value
    return node.value if type(node) is cst.Name else ""


def method_name(node: cst.CSTNode | None) -> str | None:
    """`m` for a method call `x.m(...)`; None for anything else."""
    return node.func.attr.value if type(node) is cst.Call and type(node.func) is cst.Attribute \
        else None


def _reads(node: cst.CSTNode | None, resolve: Resolve | None,
           stop: bool) -> tuple[set[str], set[str]]:
    """The keys of the values an expression reads, skipping callees and, when
    `stop` is set, whatever ends up as a host value (`.item()`, `float(...)`,
    `.shape`); and the names among them read as themselves, not as `name.attr`."""
    keys: set[str] = set()
    bare: set[str] = set()

    def read(node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Name:
            if node.value not in ("True", "False", "None"):
                keys.add(node.value)
                bare.add(node.value)
        elif kind is cst.Attribute:
            if stop and node.attr.value in _META_ATTRS:
                return
            key = key_of(node)
            if key is not None:
                keys.add(key)
            else:
                read(node.value)
                read(node.attr)
        elif kind is cst.Call:
            call(node)
        elif kind is not cst.Lambda:
            for child in children(node):
                read(child)

    def call(node: cst.Call) -> None:
        func = node.func
        if stop:
            if sync_method(node) or (type(func) is cst.Attribute
                                     and func.attr.value in _META_METHODS):
                return
            if resolve is not None and resolve(func) in PY_CONVERSIONS:
                return
            name = last_name(func)
            if name != "Variable" and (name in FACTORIES or name.endswith("Tensor")):
                return  # a new tensor: the arguments only shape it
        if type(func) is cst.Attribute:
            # the receiver is read (not the method name), unless it is a module: `torch.sum`
            receiver = func.value
            qualified = resolve(receiver) if resolve is not None and type(receiver) in (
                cst.Name, cst.Attribute) else None
            if qualified is None or qualified.startswith("builtins."):
                read(receiver)
        elif type(func) is not cst.Name:
            read(func)
        for arg in node.args:
            read(arg.value)

    if node is not None:
        read(node)
    return keys, bare


def value_keys(node: cst.CSTNode | None, resolve: Resolve | None = None, *,
               stop_at_host: bool = False) -> set[str]:
    return _reads(node, resolve, stop_at_host)[0]


@dataclass(eq=False)
class Assignment:
    """One assignment inside a loop, for the hot-loop taint analyses."""

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
    at: int = 0  # the index of its event


def assignments(events: Iterable[Event], resolve: Resolve) -> list[Assignment]:
    """The assignments of a loop's events; a loop variable is new data every iteration."""
    found: list[Assignment] = []
    for at, (kind, node, _) in enumerate(events):
        if kind == "for":
            found.append(Assignment(target_keys(node.target), set(), False, True, True, at=at))
        elif kind != "small":
            continue
        elif type(node) is cst.Assign:
            _assign(found, [t.target for t in node.targets], node.value, resolve, at)
        elif type(node) is cst.AugAssign:  # `total += x` reads `total` as well
            _assign(found, [node.target], cst.BinaryOperation(node.target, cst.Add(), node.value),
                    resolve, at)
        elif type(node) is cst.AnnAssign and node.value is not None:
            _assign(found, [node.target], node.value, resolve, at)
    return found


def _assign(found: list, targets: list, value: cst.BaseExpression, resolve: Resolve,
            at: int) -> None:
    if (len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(targets[0].elements) == len(value.elements)):
        for t, v in zip(targets[0].elements, value.elements):
            _assign(found, [t.value], v.value, resolve, at)
        return
    lhs = set().union(*map(target_keys, targets))
    keys, bare = _reads(value, resolve, True)
    arithmetic, receivers = _arithmetic(value, resolve)
    source = input_kind(value)
    host = method_name(value) in ("item", "tolist") or (  # `x.item()`, `float(x)`
        type(value) is cst.Call and resolve(value.func) in PY_CONVERSIONS)
    found.append(Assignment(lhs, keys, host, source is not None, source == "fresh", bare,
                            arithmetic, receivers, at))


def _arithmetic(value: cst.BaseExpression, resolve: Resolve) -> tuple[bool, set[str]]:
    """Whether `value` only does tensor arithmetic (operators, `torch.*`
    functions, methods), and the keys of the receivers of its method calls."""
    receivers: set[str] = set()
    for call in calls_in(value):
        func = call.func
        qualified = resolve(func) if type(func) in (cst.Name, cst.Attribute) else None
        if qualified is not None and qualified.startswith(("torch.", "builtins.")):
            continue
        if type(func) is cst.Attribute:
            root = func.value
            while type(root) in (cst.Attribute, cst.Subscript, cst.Call):
                root = root.func if type(root) is cst.Call else root.value
            if type(root) is cst.Name and root.value != "self":
                receivers.add(root.value)
                continue
        return False, receivers
    return True, receivers


def input_kind(value: cst.BaseExpression) -> str | None:
    """What kind of input `value` is, not a computation: "fresh" for a
    factory's new tensor, possibly initialised (`torch.randn(n)`,
    `LongTensor(labels)`, `Tensor(n).fill_(1)`); "move" for a name moved,
    cast, reshaped or indexed (`x.to(device)`, `batch[0].cuda().float()`,
    `Variable(x)`), a factory's tensor indexed, or a tuple of inputs."""
    if isinstance(value, (cst.Tuple, cst.List)):
        return "move" if all(input_kind(el.value) for el in value.elements) else None
    fresh = True
    while True:
        kind = type(value)
        if kind is cst.Call:
            name = last_name(value.func)
            if name == "Variable" and value.args:
                value = value.args[0].value
            elif name in FACTORIES or name.endswith("Tensor"):
                return "fresh" if fresh else "move"
            elif type(value.func) is cst.Attribute and name in _MOVE_METHODS:
                value = value.func.value
            else:
                return None
        elif kind is cst.Subscript or (kind is cst.Attribute and value.attr.value == "data"):
            value, fresh = value.value, False
        else:
            return "move" if kind is cst.Name or kind is cst.Attribute else None


def loss_keys(call: cst.Call) -> set[str]:
    """The keys of what a backward call differentiates: `loss` for
    `loss.backward()`, `scaler` and `loss` for `scaler.scale(loss).backward()`,
    `loss` for `accelerator.backward(loss)`; both names of `y.backward(grad)`,
    which reads like an engine's call but passes a gradient to the tensor `y`."""
    func = call.func
    plain = [a for a in call.args if a.keyword is None and not a.star]
    keys: set[str] = set()
    if plain:
        keys |= value_keys(plain[0].value)
    if type(func) is cst.Attribute and (not plain or key_of(func.value) is None
                                        or func.attr.value == "backward"):
        keys |= value_keys(func.value)
    return keys


def bound(kind: str, node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets a "for", "with", "handler" or "def" event binds."""
    if kind == "for":
        return [node.target]
    if kind == "with":
        return [item.asname.name for item in node.items if item.asname]
    if kind == "handler":
        return [node.name.name] if node.name else []
    return [node.name] if kind == "def" else []


def bound_in(events: Iterable[Event], from_calls: bool = False) -> set[str]:
    """The variables (`x`, `self.x`) the events bind; with `from_calls`, only
    those assigned the result of a call (`opt = SGD(...)`)."""
    found: set[str] = set()
    for kind, node, _ in events:
        if kind != "small":
            targets = [] if from_calls else bound(kind, node)
        elif type(node) is cst.Assign and (not from_calls or type(node.value) is cst.Call):
            targets = [t.target for t in node.targets]
        elif from_calls:
            continue
        elif type(node) in (cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
        elif type(node) in (cst.Import, cst.ImportFrom) and not isinstance(
                node.names, cst.ImportStar):
            targets = [a.asname.name if a.asname else a.name for a in node.names]
        else:
            continue
        for target in targets:
            found.update(target_vars(target))
    return found


def never_true(test: cst.BaseExpression, owner: cst.CSTNode) -> bool:
    """Whether `test` (of an `if` in `owner`, a function or module) cannot hold: a
    name bound once, to `False`, `None` or `0`, and used nowhere but in `if` tests
    (`parallel = False` ... `if parallel:`), or an `and` with such a name.
    Any other use of the name (a parameter, `global`, another binding, an
    argument) and the test may hold."""
    return any(type(t) is cst.Name and _switched_off(t.value, owner) for t in _conjuncts(test))


def _switched_off(name: str, owner: cst.CSTNode) -> bool:
    uses: list[int] = []
    allowed: set[int] = set()  # the falsy binding's target, and names an `if` tests
    bindings = 0
    for node in descendants(owner):
        kind = type(node)
        if kind is cst.Name and node.value == name:
            uses.append(id(node))
        elif kind is cst.If:
            allowed.update(id(n) for n in _conjuncts(node.test))
        elif kind is cst.Assign and len(node.targets) == 1 and _falsy(node.value):
            allowed.add(id(node.targets[0].target))
            bindings += dotted(node.targets[0].target) == name
    return bindings == 1 and all(use in allowed for use in uses)


def _falsy(value: cst.BaseExpression) -> bool:
    return (type(value) is cst.Name and value.value in ("False", "None")
            or type(value) is cst.Integer and value.value == "0")


def _conjuncts(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        yield from _conjuncts(test.left)
        yield from _conjuncts(test.right)
    else:
        yield test
