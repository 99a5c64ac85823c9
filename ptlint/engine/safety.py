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
from typing import Iterable, Iterator

import libcst as cst

from ptlint.analysis.names import dotted, parameter_names, target_names
from ptlint.analysis.walk import children

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
    """Whether `node` looks `name` up (an attribute `x.name`, a keyword `name=` or
    an import of it does not)."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            if current.value == name:
                return True
        elif kind is cst.Attribute or kind is cst.Arg:
            stack.append(current.value)
        elif kind is not cst.Import and kind is not cst.ImportFrom:
            stack.extend(children(current))
    return False


def _same_import(node: cst.CSTNode | None, statement: str) -> bool:
    """Whether the import statement `node` binds what `statement` would."""
    parts = statement.split()
    if parts[0] == "import" and type(node) is cst.Import:
        wanted = parts[1].split(".")[0]
        return any(alias.asname is None and (dotted(alias.name) or "").split(".")[0] == wanted
                   for alias in node.names)
    if parts[0] == "from" and type(node) is cst.ImportFrom and not node.relative \
            and node.module is not None and dotted(node.module) == parts[1] \
            and not isinstance(node.names, cst.ImportStar):
        return any(dotted(alias.name) == parts[3] and (
            alias.asname is None or getattr(alias.asname.name, "value", None) == parts[3])
            for alias in node.names)
    return False


def _bindings(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode | None]]:
    """(name, import statement or None) for each name `node` binds in the scope it
    is in. `global`/`nonlocal` count as bindings: the name is not free there."""
    kind = type(node)
    if kind is cst.Assign:
        for target in node.targets:
            yield from ((n, None) for n in target_names(target.target))
    elif kind in (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr):
        yield from ((n, None) for n in target_names(node.target))
    elif kind is cst.Del:
        yield from ((n, None) for n in target_names(node.target))
    elif kind is cst.WithItem or kind is cst.ExceptHandler or kind is cst.ExceptStarHandler:
        holder = node.asname if kind is cst.WithItem else node.name
        if holder is not None:
            yield from ((n, None) for n in target_names(holder.name))
    elif kind is cst.FunctionDef or kind is cst.ClassDef:
        yield node.name.value, None
    elif kind is cst.Global or kind is cst.Nonlocal:
        yield from ((item.name.value, None) for item in node.names)
    elif kind is cst.Import:
        for alias in node.names:
            asname = alias.asname
            yield (asname.name.value if asname is not None and type(asname.name) is cst.Name
                   else (dotted(alias.name) or "").split(".")[0]), node
    elif kind is cst.ImportFrom and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            asname = alias.asname
            yield (asname.name.value if asname is not None and type(asname.name) is cst.Name
                   else dotted(alias.name)), node
    elif kind is cst.MatchAs or kind is cst.MatchStar:
        if node.name is not None:
            yield node.name.value, None
    elif kind is cst.MatchMapping and node.rest is not None:
        yield node.rest.value, None


_SCOPES = {cst.FunctionDef: "function", cst.Lambda: "function", cst.ClassDef: "class",
           cst.ListComp: "function", cst.SetComp: "function", cst.DictComp: "function",
           cst.GeneratorExp: "function"}
Chain = tuple[tuple[int, str], ...]  # (id of the scope's node, its kind), innermost last


class Scopes:
    """Where a few names are bound, scope by scope (module, class, function, lambda,
    comprehension), found in one walk of the module on first use: only files with
    a fix that needs an import pay for it. (LibCST's ScopeProvider answers the same
    question at several times the cost of the parse.)"""

    def __init__(self, module: cst.Module, names: Iterable[str], nodes: Iterable[cst.CSTNode]
                 ) -> None:
        self.module = module
        self.names = set(names)
        self.nodes = {id(n) for n in nodes}
        self.bound: dict[tuple[int, str], list[cst.CSTNode | None]] | None = None
        self.chains: dict[int, Chain] = {}

    def _walk(self) -> dict[tuple[int, str], list[cst.CSTNode | None]]:
        bound: dict[tuple[int, str], list[cst.CSTNode | None]] = {}
        names, nodes, chains = self.names, self.nodes, self.chains
        stack: list[tuple[cst.CSTNode, Chain]] = [(self.module, ((id(self.module), "module"),))]
        while stack:
            node, chain = stack.pop()
            if id(node) in nodes:
                chains[id(node)] = chain
            for name, statement in _bindings(node):
                if name in names:
                    bound.setdefault((chain[-1][0], name), []).append(statement)
            scope = _SCOPES.get(type(node))
            if scope is not None:
                chain = (*chain, (id(node), scope))
                if type(node) is cst.FunctionDef or type(node) is cst.Lambda:
                    for name in parameter_names(node.params):
                        if name in names:
                            bound.setdefault((id(node), name), []).append(None)
            stack.extend((child, chain) for child in children(node))
        return bound

    def reaches(self, node: cst.CSTNode, statement: str) -> bool:
        """Whether `statement`, added at the top of the module, is what the code in
        place of `node` finds under the name it binds."""
        if self.bound is None:
            self.bound = self._walk()
        chain = self.chains.get(id(node))
        if chain is None:
            return False
        name = bound_name(statement)
        for i, (scope, kind) in enumerate(reversed(chain)):
            found = self.bound.get((scope, name), [])
            if kind == "module":
                return all(_same_import(s, statement) for s in found)
            if kind == "class" and i > 0:
                continue  # a class body is not visible from the functions inside it
            if found:
                return False  # bound here: the import at the top is not what it finds
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


def fstring_quotes(roots: Iterable[cst.CSTNode], nodes: Iterable[cst.CSTNode]
                   ) -> dict[int, frozenset[str]]:
    """For each of `nodes` inside an f-string's replacement field (by `id`), the
    quote characters of the f-strings around it, looked for below `roots` (the
    module, or statements: no f-string is around them)."""
    wanted = {id(n) for n in nodes}
    found: dict[int, frozenset[str]] = {}
    stack: list[tuple[cst.CSTNode, frozenset[str]]] = [(root, frozenset()) for root in roots]
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
