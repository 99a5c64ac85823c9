"""What the engine checks of every rule's fix, whatever the rule, before it offers it.

- A safe fix keeps comments: one whose edits drop a comment is offered as unsafe.
- A fix that needs an import (`import torch`, `import math`) is offered only where
  that import reaches the code it writes: the name must not be bound otherwise in
  any scope the new code looks it up in (a local `math = x`, a `for torch in ...`,
  a class attribute, a module-level `def math()` anywhere in the file).
- Code written inside an f-string's replacement field uses quotes that Python
  3.10 accepts there: never the quote of the enclosing f-string (PEP 701 allows
  that only from 3.12).

(That a fix's result is valid for the oldest Python ptlint supports is checked on
the result: `guard.valid`.)
"""
from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Iterable

import libcst as cst

from ptlint.analysis.walk import children, descendants

# -- comments ------------------------------------------------------------------------
@functools.cache
def _fields(kind: type) -> tuple[str, ...]:
    """Every field of a node class that may hold nodes, whitespace included."""
    return tuple(f.name for f in dataclasses.fields(kind) if f.type is not str)


def _comments(nodes: Iterable[cst.CSTNode | None]) -> Counter[str]:
    found: Counter[str] = Counter()
    stack = [n for n in nodes if n is not None]
    while stack:
        node = stack.pop()
        if type(node) is cst.Comment:
            found[node.value] += 1
            continue
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                stack.extend(v for v in value if isinstance(v, cst.CSTNode))
    return found


def drops_comments(old: Iterable[cst.CSTNode], new: Iterable[cst.CSTNode | None]) -> bool:
    """Whether replacing the `old` nodes by the `new` ones loses a comment."""
    return bool(_comments(old) - _comments(new))


# -- imports that must reach the code that uses them ---------------------------------------
def bound_name(statement: str) -> str:
    """The name an `import a.b` / `from a import b` statement binds."""
    parts = statement.split()
    if parts[0] == "import":
        return parts[-1] if "as" in parts else parts[1].split(".")[0]
    return parts[-1]


def uses_name(node: cst.CSTNode, name: str) -> bool:
    """Whether `node` looks `name` up (an attribute `x.name` or a keyword `name=` does not)."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            if current.value == name:
                return True
        elif kind is cst.Attribute:
            stack.append(current.value)
        elif kind is cst.Arg:
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return False


def _same_import(node: cst.CSTNode, statement: str) -> bool:
    """Whether the import statement `node` binds what `statement` would."""
    parts = statement.split()
    if parts[0] == "import" and type(node) is cst.Import:
        wanted = parts[1].split(".")[0]
        return any(alias.asname is None and _dotted(alias.name).split(".")[0] == wanted
                   for alias in node.names)
    if parts[0] == "from" and type(node) is cst.ImportFrom and not node.relative \
            and node.module is not None and _dotted(node.module) == parts[1] \
            and not isinstance(node.names, cst.ImportStar):
        return any(_dotted(alias.name) == parts[3] and (
            alias.asname is None or getattr(alias.asname.name, "value", None) == parts[3])
            for alias in node.names)
    return False


def _dotted(node: cst.CSTNode) -> str:
    if type(node) is cst.Attribute:
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if type(node) is cst.Name else ""


class Scopes:
    """LibCST's scope analysis of a module, computed on first use (it costs several
    times the parse: only files with a fix that needs an import pay it)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._scopes: dict | None = None

    def _scope_of(self, node: cst.CSTNode):
        if self._scopes is None:
            from libcst.metadata import MetadataWrapper, ScopeProvider

            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._scopes = dict(wrapper.resolve(ScopeProvider))
        for inner in descendants(node):  # a block has no scope of its own: its statements do
            scope = self._scopes.get(inner)
            if scope is not None:
                return scope
        return None

    def reaches(self, node: cst.CSTNode, statement: str) -> bool:
        """Whether `statement`, added at the top of the module, is what `node`'s
        scope finds under the name it binds."""
        from libcst.metadata import ClassScope, GlobalScope

        name = bound_name(statement)
        scope = self._scope_of(node)
        if scope is None:
            return False
        innermost = scope
        while scope is not None:
            if isinstance(scope, ClassScope) and scope is not innermost:
                scope = scope.parent  # a class body is not visible from its methods
                continue
            assignments = scope.assignments[name]
            if isinstance(scope, GlobalScope):
                return all(_same_import(a.node, statement) for a in assignments)
            if assignments:
                return False  # bound here: the import at the top is not what it finds
            scope = scope.parent
        return True


def imports_reach(scopes: Scopes, pairs: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]],
                  imports: Iterable[str]) -> bool:
    """Whether every import a fix needs reaches each of its edits that uses it."""
    for statement in imports:
        name = bound_name(statement)
        for old, new in pairs:
            if new is not None and uses_name(new, name) and not scopes.reaches(old, statement):
                return False
    return True


# -- f-strings -------------------------------------------------------------------------
_QUOTES = ("'", '"')


def fstring_quotes(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, frozenset[str]]:
    """For each of `nodes` inside an f-string's replacement field (by `id`), the
    quote characters of the f-strings around it."""
    wanted = {id(n) for n in nodes}
    found: dict[int, frozenset[str]] = {}
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(module, frozenset())]
    while stack and len(found) < len(wanted):
        node, quotes = stack.pop()
        if id(node) in wanted and quotes:
            found[id(node)] = quotes
        if type(node) is cst.FormattedString:
            quotes = quotes | {node.end[0]}
        stack.extend((child, quotes) for child in children(node))
    return found


class _Requote(cst.CSTTransformer):
    def __init__(self, avoid: frozenset[str]) -> None:
        super().__init__()
        self.avoid = avoid
        free = [q for q in _QUOTES if q not in avoid]
        self.quote = free[0] if free else None
        self.failed = False

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString
                           ) -> cst.SimpleString:
        value = updated.value
        prefix = len(value) - len(value.lstrip("rRbBuUfF"))
        quote = value[prefix]
        if quote not in self.avoid:
            return updated
        body = value[prefix + 1:-1]
        if self.quote is None or value[prefix:prefix + 3] == quote * 3 or self.quote in body \
                or "\\" in body:
            self.failed = True
            return updated
        return updated.with_changes(value=value[:prefix] + self.quote + body + self.quote)


def requoted(node: cst.CSTNode, avoid: frozenset[str]) -> cst.CSTNode | None:
    """`node` with its string literals quoted with a character not in `avoid`
    (the quotes of the f-strings it goes into), or None when one cannot be."""
    requote = _Requote(avoid)
    new = node.visit(requote)
    return None if requote.failed else new


def in_fstrings(edits: Iterable[tuple[cst.CSTNode, cst.CSTNode | None]],
                quotes: dict[int, frozenset[str]]) -> list[tuple[cst.CSTNode, cst.CSTNode | None]]:
    """A fix's (old, new) pairs with the new code that goes into an f-string
    requoted (see `fstring_quotes`); [] (no fix) when a string cannot be."""
    pairs = []
    for old, new in edits:
        if new is not None and id(old) in quotes:
            new = requoted(new, quotes[id(old)])
            if new is None:
                return []
        pairs.append((old, new))
    return pairs
