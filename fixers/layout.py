"""Edits to how a node is laid out, so that it renders right where it goes."""
from __future__ import annotations

import libcst as cst


class _Absolute(cst.CSTTransformer):
    def __init__(self, indent: str) -> None:
        super().__init__()
        self.indent = indent

    def leave_ParenthesizedWhitespace(self, original, updated):
        if not updated.indent:
            return updated
        return updated.with_changes(
            indent=False, last_line=cst.SimpleWhitespace(self.indent + updated.last_line.value))

    def leave_EmptyLine(self, original, updated):
        if not updated.indent:
            return updated
        return updated.with_changes(
            indent=False, whitespace=cst.SimpleWhitespace(self.indent + updated.whitespace.value))


def with_block_indent(node: cst.CSTNode, indent: str) -> cst.CSTNode:
    """`node`, with the continuation lines that LibCST indents relative to the
    enclosing block (`indent=True`) given that block's indentation explicitly.

    `Module.code_for_node` renders a node outside its block, so the lines of a
    multi-line call inside a function would otherwise lose the function's
    indentation when the node is used as a replacement."""
    if not indent:
        return node
    return node.visit(_Absolute(indent))
