"""Statement-level edits: insert, move and unwrap statements inside a block.

Every function takes the *owner* of a statement list (an `IndentedBlock` or
the `Module`) and returns a new owner, so a rule reports one edit that
replaces the owner. Comments travel with the statement they sit directly
above; blank lines stay where they were.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

import libcst as cst

Owner = TypeVar("Owner", cst.IndentedBlock, cst.Module)


def simple_statement(code: str) -> cst.SimpleStatementLine:
    """One simple statement line parsed from `code`, e.g. "optimizer.zero_grad()"."""
    statement = cst.parse_statement(code)
    if not isinstance(statement, cst.SimpleStatementLine):
        raise ValueError(f"not a simple statement: {code!r}")
    return statement


def split_leading_lines(
    lines: Sequence[cst.EmptyLine],
) -> tuple[tuple[cst.EmptyLine, ...], tuple[cst.EmptyLine, ...]]:
    """Split a statement's leading lines into (the rest, the comment lines
    directly above it). The second part is what "belongs" to the statement."""
    at = len(lines)
    while at > 0 and lines[at - 1].comment is not None:
        at -= 1
    return tuple(lines[:at]), tuple(lines[at:])


def _index(body: Sequence[cst.BaseStatement], statement: cst.BaseStatement) -> int:
    for i, candidate in enumerate(body):
        if candidate is statement:
            return i
    raise ValueError("statement is not in this block")


def insert_before(owner: Owner, anchor: cst.BaseStatement, new: cst.BaseStatement) -> Owner:
    """`owner` with `new` inserted just before `anchor`. Blank lines and
    detached comments above `anchor` move above `new`; the comment lines
    directly above `anchor` stay with it."""
    body = list(owner.body)
    at = _index(body, anchor)
    rest, own = split_leading_lines(anchor.leading_lines)
    body[at] = anchor.with_changes(leading_lines=own)
    body.insert(at, new.with_changes(leading_lines=(*rest, *new.leading_lines)))
    return owner.with_changes(body=body)


def insert_after(owner: Owner, anchor: cst.BaseStatement, new: cst.BaseStatement) -> Owner:
    """`owner` with `new` inserted just after `anchor`."""
    body = list(owner.body)
    body.insert(_index(body, anchor) + 1, new)
    return owner.with_changes(body=body)


def move_after(owner: Owner, statement: cst.BaseStatement, anchor: cst.BaseStatement) -> Owner:
    """`owner` with `statement` moved from where it is to just after `anchor`
    (both directly in `owner`, in either order). The comment lines directly
    above `statement` move with it; its blank lines stay behind, unless it
    opened an indented block (the block does not start with a blank line)."""
    body = list(owner.body)
    at = _index(body, statement)
    _index(body, anchor)
    rest, own = split_leading_lines(statement.leading_lines)
    del body[at]
    footer = owner.footer
    if rest:
        if at < len(body):
            follower = body[at]
            body[at] = follower.with_changes(leading_lines=(*rest, *follower.leading_lines))
            if follower is anchor:  # (the statement goes just below its own follower)
                anchor = body[at]
        else:
            footer = (*rest, *footer)
    if at == 0 and isinstance(owner, cst.IndentedBlock):  # no blank line opens the block now
        first = body[0]
        lines = list(first.leading_lines)
        while lines and lines[0].comment is None:
            del lines[0]
        body[0] = first.with_changes(leading_lines=lines)
        anchor = body[0] if first is anchor else anchor
    body.insert(_index(body, anchor) + 1, statement.with_changes(leading_lines=own))
    return owner.with_changes(body=body, footer=footer)


def hoist_out_of_with(owner: Owner, with_node: cst.With, first: cst.BaseStatement) -> Owner:
    """`owner` with `first` and every statement after it in the body of
    `with_node` moved out, to just after the `with`. A `with` left with an
    empty body is dropped; its comments are kept."""
    body = list(owner.body)
    at = _index(body, with_node)
    if not isinstance(with_node.body, cst.IndentedBlock):
        raise ValueError("the with body is not an indented block")
    inner = list(with_node.body.body)
    split = _index(inner, first)
    kept, moved = inner[:split], inner[split:]
    footer = owner.footer
    if kept:
        body[at:at + 1] = [with_node.with_changes(body=with_node.body.with_changes(body=kept)),
                           *moved]
        return owner.with_changes(body=body)
    # the `with` disappears: its own comments go to the first moved statement,
    # and the comments at the end of its block follow the moved statements
    header = with_node.body.header
    lines = list(with_node.leading_lines)
    if header.comment is not None:
        lines.append(cst.EmptyLine(comment=header.comment))
    moved[0] = moved[0].with_changes(leading_lines=(*lines, *moved[0].leading_lines))
    trailing = tuple(with_node.body.footer)
    if trailing:
        if at + 1 < len(body):
            follower = body[at + 1]
            body[at + 1] = follower.with_changes(
                leading_lines=(*trailing, *follower.leading_lines))
        else:
            footer = (*trailing, *footer)
    body[at:at + 1] = moved
    return owner.with_changes(body=body, footer=footer)


def without_statement(owner: Owner, statement: cst.BaseStatement, *,
                      keep_comments: bool = True) -> Owner:
    """`owner` without its direct child `statement`; a block left empty gets `pass`.
    The comments and blank lines above `statement` stay, on the next statement,
    unless `keep_comments` is False (they leave with a statement that moves elsewhere)."""
    body = list(owner.body)
    at = _index(body, statement)
    del body[at]
    if not keep_comments:
        statement = statement.with_changes(leading_lines=())
    if at < len(body):
        following = body[at]
        body[at] = following.with_changes(
            leading_lines=(*statement.leading_lines, *following.leading_lines))
    if not body and isinstance(owner, cst.IndentedBlock):
        body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=statement.leading_lines)]
    return owner.with_changes(body=body)


def statement(code: str) -> cst.BaseStatement:
    """One statement of any kind parsed from `code` (e.g. "scaler.unscale_(optimizer)")."""
    return cst.parse_statement(code)
