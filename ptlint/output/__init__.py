"""Renderers: every output format consumes the same list of findings.

`render(findings, sources, errors)` returns text for the machine formats;
`full` returns rich renderables so colour follows the terminal (and NO_COLOR).
`sources` maps each path to its text (a notebook's to the `.ipynb` file's, and
each of its cells to the cell's source), for formats that quote source lines or
place notebook findings in the file; `errors` are the run's error lines.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ptlint.model import Finding
from ptlint.output import concise, full, github, gitlab, json, sarif
from ptlint.output.where import location, source_key

__all__ = ["FORMATS", "Renderer", "location", "source_key"]

Renderer = Callable[[list[Finding], Mapping[str, str], Sequence[str]], object]

FORMATS: dict[str, Renderer] = {
    "full": full.render,
    "concise": concise.render,
    "json": json.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
}

