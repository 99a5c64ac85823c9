"""Renderers: every output format consumes the same list of findings.

`render(findings, sources, errors)` returns text for the machine formats;
`full` returns rich renderables so colour follows the terminal (and NO_COLOR).
`sources` maps each path to its text (a notebook's to the `.ipynb` file's, and
each of its cells to the cell's source), for formats that quote source lines or
place notebook findings in the file; `errors` are the run's error lines.
"""
from __future__ import annotations

import importlib
from typing import Callable, Mapping, Sequence

from ptlint.config import OUTPUT_FORMATS
from ptlint.model import Finding
from ptlint.output.where import location, source_key

__all__ = ["Renderer", "location", "renderer", "source_key"]

Renderer = Callable[[list[Finding], Mapping[str, str], Sequence[str]], object]


def renderer(fmt: str) -> Renderer:
    """The `render` of an output format (one of `OUTPUT_FORMATS`). Only that
    format's module is imported: the colour library only for `full`."""
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"unknown output format {fmt!r}")
    return importlib.import_module(f"ptlint.output.{fmt.replace('-', '_')}").render

