"""Where a finding is, in words and in the `sources` map the renderers share."""
from __future__ import annotations

from ptlint.model import Finding


def source_key(path: str, cell: int | None = None) -> str:
    """The key of a file's text in `sources`; a notebook cell has its own."""
    return path if cell is None else f"{path}\0cell {cell}"


def location(finding: Finding) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook (1-based)."""
    where = f"{finding.span.start.line}:{finding.span.start.column + 1}"
    if finding.cell is not None:
        return f"{finding.path}:cell {finding.cell}:{where}"
    return f"{finding.path}:{where}"
