"""Renderers: every output format consumes the same list of findings.

`render(findings, sources)` returns text for the machine formats; `full`
returns rich renderables so colour follows the terminal (and NO_COLOR).
`sources` maps each path to its text, for formats that quote source lines.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ptlint.model import Finding
from ptlint.output import concise, full, github, gitlab, json, sarif

Renderer = Callable[[list[Finding], Mapping[str, str]], object]

FORMATS: dict[str, Renderer] = {
    "full": full.render,
    "concise": concise.render,
    "json": json.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
}


def source_key(path: str, cell: int | None = None) -> str:
    """The key of a file's text in `sources`; a notebook cell has its own."""
    return path if cell is None else f"{path}\0cell {cell}"


def location(finding: Finding) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook (1-based)."""
    where = f"{finding.span.start.line}:{finding.span.start.column + 1}"
    if finding.cell is not None:
        return f"{finding.path}:cell {finding.cell}:{where}"
    return f"{finding.path}:{where}"
