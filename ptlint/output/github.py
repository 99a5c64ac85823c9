"""GitHub Actions workflow commands (`::warning file=…::message`), at SARIF's level."""
from __future__ import annotations

from typing import Mapping, Sequence

from ptlint.io.text import printable
from ptlint.model import Finding
from ptlint.output.where import file_lines, level, location


def _data(text: str) -> str:
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    lines = []
    for f in findings:
        start, end = file_lines(f, sources)
        props = [f"title={_prop(f'ptlint ({f.code})')}", f"file={_prop(f.path)}", f"line={start}"]
        # columns only make sense on one line, and a notebook cell's are not the file's
        if f.cell is None and f.span.start.line == f.span.end.line:
            props.append(f"col={f.span.start.column + 1}")
            props.append(f"endColumn={f.span.end.column + 1}")
        props.append(f"endLine={end}")
        lines.append(f"::{level(f.code)} {','.join(props)}::"
                     f"{_data(f'{location(f)}: {f.code} {f.message}')}")
    return "".join(line + "\n" for line in lines)
