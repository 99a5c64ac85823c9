"""Edits to a block of statements: insert or remove whole statements.

A block is an `IndentedBlock` or a `Module`; both keep their statements in
`body`. Replacing the block with the returned one is the edit."""
from __future__ import annotations

from typing import TypeVar

import libcst as cst

Block = TypeVar("Block", cst.IndentedBlock, cst.Module)


def _index(block: cst.IndentedBlock | cst.Module, stmt: cst.BaseStatement) -> int:
    for i, child in enumerate(block.body):
        if child is stmt:
            return i
    raise ValueError("the statement is not a direct child of the block")


def insert_before(block: Block, stmt: cst.BaseStatement, new: cst.BaseStatement) -> Block:
    """`block` with `new` inserted just before its direct child `stmt`. The comments
    and blank lines above `stmt` move above `new` (and its own), so they still head
    the group."""
    i = _index(block, stmt)
    body = list(block.body)
    new = new.with_changes(leading_lines=(*stmt.leading_lines, *new.leading_lines))
    body[i:i + 1] = [new, stmt.with_changes(leading_lines=())]
    return block.with_changes(body=body)


def without_statement(block: Block, stmt: cst.BaseStatement, *, keep_comments: bool = True) -> Block:
    """`block` without its direct child `stmt`; a block left empty gets `pass`.
    The comments and blank lines above `stmt` stay, on the next statement, unless
    `keep_comments` is False (they leave with a statement that moves elsewhere)."""
    i = _index(block, stmt)
    body = list(block.body)
    del body[i]
    if not keep_comments:
        stmt = stmt.with_changes(leading_lines=())
    if i < len(body):
        nxt = body[i]
        body[i] = nxt.with_changes(leading_lines=(*stmt.leading_lines, *nxt.leading_lines))
    if not body and isinstance(block, cst.IndentedBlock):
        body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=stmt.leading_lines)]
    return block.with_changes(body=body)


def statement(code: str) -> cst.BaseStatement:
    """One statement parsed from `code` (e.g. "scaler.unscale_(optimizer)")."""
    return cst.parse_statement(code)
