"""Small helpers for intra-function dataflow rules.

A rule collects the bodies of the functions (and the module) it cares about
during the batched traversal and analyses each body when it is left, as an
ordered list of statements with their enclosing loops. Variables are named by
their text: `x`, `self.x`; a subscript names its base (`h["k"]` is `h`).
Nothing here resolves imports: rules record what they need from
`Rule.qualified_name` while the traversal is at the node.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.analysis.walk import PerType
from ptlint.analysis.walk import children as walk_children

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


def body_of(node: cst.FunctionDef | cst.Module) -> Iterable[cst.BaseStatement]:
    return node.body if isinstance(node, cst.Module) else block(node.body)


def statements(body: Iterable[cst.BaseStatement], loops: tuple = ()) -> Iterator[Event]:
    """The statements of a body in source order, without descending into nested
    functions and classes. A `while` test counts as inside its loop."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                yield "small", small, loops
        elif isinstance(stmt, cst.SimpleStatementSuite):
            for small in stmt.body:
                yield "small", small, loops
        elif isinstance(stmt, (cst.For, cst.While)):
            inner = (*loops, stmt)
            if isinstance(stmt, cst.For):
                yield "for", stmt, inner
            else:
                yield "expr", stmt.test, inner
            yield from statements(block(stmt.body), inner)
            if stmt.orelse is not None:
                yield from statements(block(stmt.orelse.body), loops)
        elif isinstance(stmt, cst.If):
            yield "expr", stmt.test, loops
            yield from statements(block(stmt.body), loops)
            orelse = stmt.orelse
            if isinstance(orelse, cst.If):
                yield from statements((orelse,), loops)
            elif orelse is not None:
                yield from statements(block(orelse.body), loops)
        elif isinstance(stmt, cst.With):
            yield "with", stmt, loops
            yield from statements(block(stmt.body), loops)
            yield "end_with", stmt, loops
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            yield from statements(block(stmt.body), loops)
            for handler in stmt.handlers:
                yield "handler", handler, loops
                yield from statements(block(handler.body), loops)
            if stmt.orelse is not None:
                yield from statements(block(stmt.orelse.body), loops)
            if stmt.finalbody is not None:
                yield from statements(block(stmt.finalbody.body), loops)
        elif isinstance(stmt, cst.Match):
            yield "expr", stmt.subject, loops
            for case in stmt.cases:
                yield from statements(block(case.body), loops)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            yield "def", stmt, loops


_SKIPPED = PerType(lambda kind: issubclass(kind, (
    cst.BaseParenthesizableWhitespace, cst.Comma, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
    cst.BaseAugOp, cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseUnaryOp, cst.BaseCompOp,
    cst.AssignEqual, cst.Dot, cst.Colon, cst.Semicolon, cst.EmptyLine, cst.Comment, cst.Newline,
    cst.TrailingWhitespace, cst.Asynchronous)))


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes of `node` that can hold expressions, in source order.
    Much cheaper than `CSTNode.children`, which rebuilds the node."""
    return [child for child in walk_children(node) if not _SKIPPED[type(child)]]


def evaluated(kind: str, node: cst.CSTNode) -> cst.CSTNode:
    """What an event evaluates: a `for`'s iterable, a `with`'s context
    expressions (as one tuple), or the node itself."""
    if kind == "for":
        return node.iter
    if kind == "with":
        return cst.Tuple([cst.Element(item.item) for item in node.items])
    return node


def var(node: cst.BaseExpression) -> str | None:
    """The variable a target or receiver names: `x`, `self.x`, and `h` for `h["k"]`."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return dotted(node)


def target_vars(node: cst.BaseExpression,
                name_of: Callable[[cst.BaseExpression], str | None] = var) -> Iterator[str]:
    """The variables an assignment target binds or stores into (each element of
    a tuple or list target, named by `name_of`)."""
    if isinstance(node, (cst.Tuple, cst.List)):
        for element in node.elements:
            yield from target_vars(element.value, name_of)
    elif isinstance(node, cst.StarredElement):
        yield from target_vars(node.value, name_of)
    else:
        name = name_of(node)
        if name is not None:
            yield name


def vars_in(node: cst.CSTNode | None) -> set[str]:
    """Every variable an expression mentions: names and attribute chains (with
    their base names); not keyword names nor the `.attr` of a call's result."""
    found: set[str] = set()
    if node is None:
        return found
    stack = [node]
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


_CONSTANTS = (cst.SimpleString, cst.Integer, cst.Float)
_NO_CALLS_INSIDE = (cst.Lambda, cst.SimpleString, cst.Name)


def calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls inside `node`, outside lambdas, outermost first."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Call:
            yield current
        elif kind in _NO_CALLS_INSIDE:
            continue
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
