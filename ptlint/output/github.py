"""GitHub Actions workflow commands (`::error file=…::message`)."""
from __future__ import annotations

from typing import Mapping

from ptlint.model import Finding


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], sources: Mapping[str, str]) -> str:
    lines = []
    for f in findings:
        props = [f"title={_prop(f'ptlint ({f.code})')}", f"file={_prop(f.path)}",
                 f"line={f.span.start.line}"]
        if f.span.start.line == f.span.end.line:  # columns only make sense on one line
            props.append(f"col={f.span.start.column + 1}")
            props.append(f"endColumn={f.span.end.column + 1}")
        props.append(f"endLine={f.span.end.line}")
        where = f"cell {f.cell}:" if f.cell is not None else ""
        lines.append(
            f"::error {','.join(props)}::{_data(f'{f.path}:{where}{f.span.start.line}:{f.span.start.column + 1}: {f.code} {f.message}')}"
        )
    return "".join(line + "\n" for line in lines)
