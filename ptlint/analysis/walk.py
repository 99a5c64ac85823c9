"""A lean traversal for batched rules.

LibCST's own visitor traversal rebuilds every node while it walks (it is
shared with transformers), which costs about a third of the parse. Rules only
read the tree, so this walker reads each node's child fields directly and
calls the same `visit_<Node>` / `leave_<Node>` methods the batched visitors
declare. It is iterative, so deep nesting does not hit Python's recursion
limit. `visit_<Node>_<attribute>` hooks are supported too. Children are
visited in the order LibCST itself visits them (read once
from each node class's `_visit_and_replace_children`); whitespace, commas and
parentheses are not visited.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable, Iterator

import libcst as cst

_SKIP = {"lpar", "rpar", "leading_lines", "lines_after_decorators", "comma", "semicolon",
         "header", "footer", "equal", "colon", "dot", "newline", "indent", "star"}
_FIELDS: dict[type, tuple[str, ...]] = {}

Handler = Callable[[cst.CSTNode], None]


@functools.cache
def method_names(cls: type) -> tuple[str, ...]:
    """The `visit_*`/`leave_*` methods a visitor class defines (no-op stubs excluded).

    LibCST's `get_visitors` finds them with `inspect.getmembers` on every
    instance (milliseconds each, for every rule and every file) and drops
    methods defined as aliases; this looks them up once per class, by name,
    in the classes below `Visitor` only (LibCST's classes above it declare a
    stub for every node: `dir` would list them all).
    """
    own = cls.__mro__[:cls.__mro__.index(Visitor)] if Visitor in cls.__mro__ else cls.__mro__
    names = []
    for name in sorted({name for klass in own for name in vars(klass)}):
        if name.startswith(("visit_", "leave_")):
            method = getattr(cls, name)
            if callable(method) and not getattr(method, "_is_no_op", False):
                names.append(name)
    return tuple(names)


class Visitor(cst.BatchableCSTVisitor):
    """A batchable visitor whose `get_visitors` is cheap (see `method_names`)."""

    def get_visitors(self) -> dict[str, Handler]:
        return {name: getattr(self, name) for name in method_names(type(self))}


def child_fields(kind: type) -> tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        # `_visit_and_replace_children` visits the fields in order, naming each
        # as a string (`visit_required(self, "value", ...)`): its code's string
        # constants, in order of first use (reading its source would cost more
        # than a small file's whole lint).
        code = getattr(getattr(kind, "_visit_and_replace_children", None), "__code__", None)
        order = [c for c in code.co_consts if type(c) is str] if code is not None else []
        # a field typed `str` (`Name.value`) never holds a node
        declared = [f.name for f in dataclasses.fields(kind) if f.type is not str]
        order = list(dict.fromkeys(n for n in order if n in declared)) or declared
        fields = tuple(n for n in order if n not in _SKIP and "whitespace" not in n)
        _FIELDS[kind] = fields
    return fields


class PerType(dict):
    """`table[type(x)]`: `compute(type(x))`, remembered per type.

    For tests like `isinstance(x, SomeNode)` in loops that run for every
    node: LibCST's node classes are abstract base classes, and `isinstance`
    against them goes through `ABCMeta.__instancecheck__`, several times
    slower than this lookup."""

    def __init__(self, compute: Callable[[type], bool]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, kind: type) -> bool:
        found = self[kind] = self.compute(kind)
        return found


# (the class hierarchy, not `issubclass`: ABCMeta answers a class that is no
# node by searching every node class, on the first question about each)
_IS_NODE = PerType(lambda kind: cst.CSTNode in kind.__mro__)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes `walk` visits, in LibCST's visiting order."""
    out: list[cst.CSTNode] = []
    is_node = _IS_NODE
    kind = type(node)
    for name in _FIELDS.get(kind) or child_fields(kind):
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            for item in value:
                if is_node[type(item)]:
                    out.append(item)
        elif is_node[kind]:
            out.append(value)
    return out


def descendants(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and every node below it that `walk` visits, in the same order:
    what `libcst.matchers.findall` finds for expression and statement nodes,
    many times cheaper (no visitor, no whitespace nodes)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def dispatch_tables(visitors: Iterable[cst.BatchableCSTVisitor]) -> tuple[dict, dict, dict]:
    """`visit_X`/`leave_X` methods of all visitors by node class, and
    `visit_X_attr`/`leave_X_attr` by (node class, attribute), in visitor order."""
    visit: dict[type, tuple[Handler, ...]] = {}
    leave: dict[type, tuple[Handler, ...]] = {}
    attribute: dict[tuple[type, str, str], tuple[Handler, ...]] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            prefix, _, rest = name.partition("_")
            kind_name, _, attr = rest.partition("_")
            kind = getattr(cst, kind_name, None)
            if kind is None or (attr and attr not in child_fields(kind)):
                raise TypeError(f"{type(visitor).__name__}.{name}: unsupported visitor method")
            table, key = ((attribute, (kind, attr, prefix)) if attr else
                          (visit if prefix == "visit" else leave, kind))
            table[key] = (*table.get(key, ()), method)
    return visit, leave, attribute


_LEAVE, _ATTR_VISIT, _ATTR_LEAVE = range(3)

# Called with the visitor whose method raised and the exception; returns
# whether the walk may go on without that visitor (else the exception propagates).
OnError = Callable[[object, Exception], bool]


def walk(root: cst.CSTNode, visitors: Iterable[cst.BatchableCSTVisitor],
         on_error: OnError | None = None) -> None:
    """Call the visitors' `visit_*`/`leave_*` methods over the tree of `root`.

    A method that raises is given to `on_error` (the exception handling costs
    nothing until something raises, unlike a wrapper around every method);
    if it agrees, that visitor is left out from then on."""
    tables = dispatch_tables(visitors)
    visit, leave, attribute = tables
    with_attribute_hooks = {kind for kind, _, _ in attribute}
    node_type = cst.CSTNode
    is_node = _IS_NODE
    # A leaf (no child fields: a name, a number, an operator) that no visitor
    # handles is not pushed at all: about a third of the nodes.
    needed = PerType(lambda kind: bool(
        kind in visit or kind in leave or kind in with_attribute_hooks or child_fields(kind)))
    stack: list = [root]  # a node to visit, or a tuple: (node, _LEAVE) or an attribute hook
    pop, push = stack.pop, stack.append

    def failed(handler: Handler, exc: Exception) -> None:
        owner = getattr(handler, "__self__", None)
        if isinstance(exc, RecursionError) or on_error is None or not on_error(owner, exc):
            raise exc
        for table in tables:
            for key, handlers in list(table.items()):
                table[key] = tuple(h for h in handlers if getattr(h, "__self__", None) is not owner)

    while stack:
        node = pop()
        if type(node) is tuple:
            item = node
            node = item[0]
            if item[1] == _LEAVE:
                handlers = leave[type(node)]
            else:  # an attribute hook: (node, state, attribute)
                prefix = "visit" if item[1] == _ATTR_VISIT else "leave"
                handlers = attribute.get((type(node), item[2], prefix), ())
            for handler in handlers:
                try:
                    handler(node)
                except Exception as exc:  # noqa: BLE001 - see `failed`
                    failed(handler, exc)
            continue
        kind = type(node)
        handlers = visit.get(kind)
        if handlers:
            for handler in handlers:
                try:
                    handler(node)
                except Exception as exc:  # noqa: BLE001 - see `failed`
                    failed(handler, exc)
        if kind in leave:
            push((node, _LEAVE))
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = child_fields(kind)
        if kind not in with_attribute_hooks:
            if fields:  # `children`, inlined: this loop runs for every node
                found = []
                for name in fields:
                    value = getattr(node, name)
                    value_kind = type(value)
                    if value_kind is list or value_kind is tuple:
                        found.extend(value)
                    elif is_node[value_kind] and needed[value_kind]:
                        found.append(value)
                found.reverse()
                stack.extend(found)
            continue
        work: list = []
        for name in fields:
            value = getattr(node, name)
            work.append((node, _ATTR_VISIT, name))
            if isinstance(value, node_type):
                work.append(value)
            elif isinstance(value, (list, tuple)):
                work.extend(v for v in value if isinstance(v, node_type))
            work.append((node, _ATTR_LEAVE, name))
        work.reverse()
        stack.extend(work)
