"""Where a node sits among statements, and paths through a body's statements:
what the semantic model answers about statements (`path`, `scan`, `holders`).
"""
from __future__ import annotations

from typing import Callable, Iterable, TypeVar

import libcst as cst

from ptlint.analysis.walk import children, descendants

S = TypeVar("S")
_ENDS_PATH = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_CLAUSES = (cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.Finally,
            cst.MatchCase)


def last_statement(block: cst.BaseSuite) -> cst.CSTNode | None:
    """The last statement of a block: the last small statement of its last line
    (`break` in `if i == 1: break`), or its last compound statement."""
    body = block.body
    last = body[-1] if body else None
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1] if last.body else None
    return last


def path(node: cst.CSTNode, root: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from `root` down to `node` (both included), or [] when `node`
    is not under `root`: where a fix finds the blocks and statements."""
    found, pending = [root], [iter(children(root))]
    while pending:
        for child in pending[-1]:
            if child is node:
                return [*found, child]
            found.append(child)
            pending.append(iter(children(child)))
            break
        else:
            pending.pop()
            found.pop()
    return []


def holders(body: Iterable[cst.BaseStatement]) -> dict[int, cst.CSTNode]:
    """For every node in `body` (not in nested functions and classes), by id:
    the simple statement line or suite that holds it, or the compound
    statement whose header it is in (an `if`'s test, a `for`'s iterable)."""
    found: dict[int, cst.CSTNode] = {}
    pending = list(body)
    while pending:
        statement = pending.pop()
        kind = type(statement)
        if kind in (cst.FunctionDef, cst.ClassDef):
            continue
        if kind in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            found.update((id(n), statement) for n in descendants(statement))
            continue
        for child in children(statement):  # a header's parts, or a block or clause
            if isinstance(child, _CLAUSES):
                pending.append(child)
            else:
                found.update((id(n), statement) for n in descendants(child))
    return found


def scan(body, state: S, apply: Callable[[cst.CSTNode, S], S],
         join: Callable[..., S]) -> S | None:
    """Follow `state` through the statements of `body` (a suite or a list of
    statements) along every path: `apply(holder, state)` for each simple
    statement line or suite and each compound statement's header, in order;
    `join(*states)` where paths meet (only paths still alive). A loop's body
    is taken to run; `return`, `raise`, `break` and `continue` end a path.
    Returns the state after the body, or None if no path ends there."""
    if isinstance(body, cst.BaseSuite):
        if type(body) is cst.SimpleStatementSuite:
            return _line(body, state, apply)
        body = body.body
    for statement in body:
        if state is None:
            return None
        state = _statement(statement, state, apply, join)
    return state


def _line(holder, state, apply):
    state = apply(holder, state)
    return None if any(isinstance(s, _ENDS_PATH) for s in holder.body) else state


def _statement(statement, state, apply, join):
    kind = type(statement)
    if kind is cst.SimpleStatementLine:
        return _line(statement, state, apply)
    if kind in (cst.FunctionDef, cst.ClassDef):
        return state
    state = apply(statement, state)  # what the header does

    def merge(*states):
        live = [s for s in states if s is not None]
        return join(*live) if live else None

    if kind is cst.If:
        orelse = statement.orelse
        other = state if orelse is None else (
            _statement(orelse, state, apply, join) if type(orelse) is cst.If
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
        final = scan(statement.finalbody.body, after if after is not None else state, apply, join)
        return final if after is not None else None
    if kind is cst.Match:
        return merge(state, *(scan(c.body, state, apply, join) for c in statement.cases))
    return state
