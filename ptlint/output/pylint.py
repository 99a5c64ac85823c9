"""`path:line: [CODE] message`, the format pylint's and ruff's `pylint` output share,
which editors and CI problem matchers made for pylint read."""
from __future__ import annotations

from typing import Mapping, Sequence

from ptlint.io.text import printable
from ptlint.model import Finding, cell_label


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    out = []
    for f in findings:
        where = printable(f.path) + (f":{cell_label(f.cell)}" if f.cell is not None else "")
        out.append(f"{where}:{f.span.start.line}: [{f.code}] {f.message}\n")
    return "".join(out)
