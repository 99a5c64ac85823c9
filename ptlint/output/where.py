"""Where a finding is, in words and in the `sources` map the renderers share;
how severe it is; where its file is for CI systems."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ptlint.io.text import printable
from ptlint.model import Finding, cell_label


def source_key(path: str, cell: int | None = None) -> str:
    """The key of a file's text in `sources`; a notebook cell has its own (a
    notebook's own key holds the `.ipynb` file's text)."""
    return path if cell is None else f"{path}\0cell {cell}"


def location(finding: Finding) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook (1-based), ready for
    a terminal (control characters in the path escaped)."""
    where = f"{finding.span.start.line}:{finding.span.start.column + 1}"
    if finding.cell is not None:
        return f"{printable(finding.path)}:{cell_label(finding.cell)}:{where}"
    return f"{printable(finding.path)}:{where}"


def in_cell(finding: Finding) -> str:
    """`cell 3, line 2, column 5` for a notebook finding; "" otherwise."""
    if finding.cell is None:
        return ""
    start = finding.span.start
    return f"{cell_label(finding.cell)}, line {start.line}, column {start.column + 1}"


def level(code: str) -> str:
    """SARIF's level of a rule, which GitHub annotations use too: correctness
    rules (and syntax errors) are errors, the others warnings."""
    return "error" if code[3] == "0" else "warning"


def file_lines(finding: Finding, sources: Mapping[str, str]) -> tuple[int, int]:
    """The lines of the file itself that the finding covers. For a notebook, the
    lines of the `.ipynb` (JSON) file that hold the first and the last line of
    the finding in its cell; positions inside a cell are not positions in the file."""
    start, end = finding.span.start.line, finding.span.end.line
    if finding.cell is None:
        return start, end
    from ptlint.io.notebook import source_lines  # (notebooks only: JSON scanning)

    lines = source_lines(sources.get(source_key(finding.path), "")).get(finding.cell)
    if not lines:
        return 1, 1
    return lines[min(start, len(lines)) - 1], lines[min(end, len(lines)) - 1]


def repository_root() -> Path:
    """The root of the repository the command runs in (the nearest folder up from
    the working directory that has a `.git`), else the working directory."""
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def relative_to_root(path: str, root: Path) -> str | None:
    """`path` relative to `root`, with `/` separators, or None if it is outside."""
    absolute = Path(os.path.abspath(path))
    for candidate, base in ((absolute, root), (absolute.resolve(), root.resolve())):
        try:
            return candidate.relative_to(base).as_posix()
        except ValueError:
            continue
    return None
