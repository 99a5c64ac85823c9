"""A mixin for rules whose replacements may span several lines (not a rule module)."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.layout import with_block_indent


class TracksIndent:
    """Tracks the indentation of the block being visited, so replacements can
    be rendered with `with_block_indent` (see there for why)."""

    _indents: list[str]
    _default_indent = "    "

    def visit_Module(self, node: cst.Module) -> None:
        self._default_indent = node.default_indent
        self._indents = [""]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        step = node.indent if node.indent is not None else self._default_indent
        self._indents.append(self._indents[-1] + step)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._indents.pop()

    def laid_out(self, node: cst.CSTNode) -> cst.CSTNode:
        """`node` ready to replace a node of the block being visited."""
        indents = getattr(self, "_indents", None)
        return with_block_indent(node, indents[-1]) if indents else node
