"""reviewdog's Diagnostic Format (rdjson), ruff's `rdjson`: one JSON object whose
`diagnostics` carry each finding's range (1-based lines and columns) and its fix's
edits as `suggestions` when reviewdog can apply them as they are (a safe fix that
adds no import; `--fix` applies the others). A notebook finding points at the lines of the `.ipynb`
file, without columns or suggestions (those are positions in the cell), and says
where it is in the cell in its message."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from ptlint.model import Finding, Position, Safety
from ptlint.output.where import file_lines, in_cell


def _position(pos: Position) -> dict[str, int]:
    return {"line": pos.line, "column": pos.column + 1}


def _diagnostic(f: Finding, sources: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"message": f.message, "code": {"value": f.code}}
    if f.cell is None:
        out["location"] = {"path": f.path, "range": {"start": _position(f.span.start),
                                                     "end": _position(f.span.end)}}
        if f.fix is not None and f.fix.safety is Safety.SAFE and not f.fix.imports:
            out["suggestions"] = [
                {"range": {"start": _position(e.start), "end": _position(e.end)},
                 "text": e.content} for e in f.fix.edits]
    else:
        start, end = file_lines(f, sources)
        out["message"] += f" ({in_cell(f)})"
        out["location"] = {"path": f.path, "range": {"start": {"line": start},
                                                     "end": {"line": end}}}
    return out


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    report = {"source": {"name": "ptlint"}, "severity": "WARNING",
              "diagnostics": [_diagnostic(f, sources) for f in findings]}
    return json.dumps(report, indent=2) + "\n"
