"""One JSON array of findings, with ruff's field names plus flat positions."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ptlint.model import Finding, Position, cell_number


def _loc(pos: Position) -> dict[str, int]:
    return {"line": pos.line, "column": pos.column + 1}


def as_dict(f: Finding) -> dict[str, Any]:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.safety.value,
            "message": f.fix.title,
            "edits": [
                {"content": e.content, "location": _loc(e.start), "end_location": _loc(e.end)}
                for e in f.fix.edits
            ],
            "imports": list(f.fix.imports),
        }
    out: dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "path": f.path,
        "filename": f.path,
        "line": f.span.start.line,
        "column": f.span.start.column + 1,
        "end_line": f.span.end.line,
        "end_column": f.span.end.column + 1,
        "location": _loc(f.span.start),
        "end_location": _loc(f.span.end),
        "noqa_row": f.span.start.line,
        "fix": fix,
        "url": None,  # ruff's field: no rule has a documentation page online
    }
    if f.cell is not None:  # the cell's number, as in `nb.ipynb:cell 3:2:5` (ruff's field)
        out["cell"] = cell_number(f.cell)
    return out


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    return json.dumps([as_dict(f) for f in findings], indent=2) + "\n"
