"""ruff's `grouped` layout: each file's name on a line of its own, then its
findings indented, `line:col CODE message` with the positions aligned, and a
blank line after each file. Findings in a notebook start with their cell."""
from __future__ import annotations

from itertools import groupby
from typing import Mapping, Sequence

from ptlint.io.text import printable
from ptlint.model import Finding, cell_label


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    out = []
    for path, group in groupby(findings, key=lambda f: f.path):
        rows = [(_where(f), f) for f in group]
        width = max(len(where) for where, _ in rows)
        out.append(f"{printable(path)}:\n")
        out.extend(f"  {where:<{width}} {f.code} {f.message}\n" for where, f in rows)
        out.append("\n")
    return "".join(out)


def _where(finding: Finding) -> str:
    start = finding.span.start
    where = f"{start.line}:{start.column + 1}"
    return where if finding.cell is None else f"{cell_label(finding.cell)}:{where}"
