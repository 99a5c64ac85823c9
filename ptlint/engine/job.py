"""One file's work: what is asked (`Job`) and what comes back (`Outcome`), and
the lint or fix of one module's text that the `.py`, notebook, stdin and editor
paths share."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from ptlint.config import Settings
from ptlint.io.diff import unified_diff
from ptlint.io.text import DecodeError
from ptlint.model import SYNTAX_ERROR, Finding, Position, Span

Mode = Literal["check", "fix", "diff"]


@dataclass
class Outcome:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    text: str | None = None  # the text the findings refer to (after fixing)
    fixed: int = 0
    diff: str | None = None
    new_text: str | None = None  # stdin with --fix: what to print
    timings: dict[str, float] = field(default_factory=dict)
    cells: dict[int, str] = field(default_factory=dict)  # notebooks: cell index -> source


@dataclass
class Job:
    settings: Settings
    mode: Mode = "check"
    unsafe: bool = False
    cache: bool = True
    timings: bool = False


def decode_error(path: str, exc: DecodeError) -> Finding:
    code, name = SYNTAX_ERROR
    at = Position(exc.line, exc.column)
    return Finding(path, code, name, f"SyntaxError: {exc}", Span(at, at))


def process_text(path: str, text: str, job: Job) -> Outcome:
    """Lint (or fix) one module's text; the notebook and stdin paths share this."""
    # The engine imports LibCST and the rules: not needed when every result is cached.
    from ptlint.engine.fix import fix_text
    from ptlint.engine.lint import lint_text

    timings: dict[str, float] | None = {} if job.timings else None
    if job.mode == "check":
        result = lint_text(text, path, job.settings, timings=timings)
        return Outcome(path, result.findings, result.errors, text, timings=timings or {})
    started = time.perf_counter()
    fixed = fix_text(text, path, job.settings, unsafe=job.unsafe)
    if timings is not None:
        timings["fix (all passes)"] = time.perf_counter() - started
    out = Outcome(path, fixed.result.findings, fixed.result.errors, fixed.text,
                  fixed=fixed.applied, timings=timings or {})
    if fixed.text != text:
        out.new_text = fixed.text
        if job.mode == "diff":
            out.diff = unified_diff(path, text, fixed.text)
            out.text = text
            out.findings = lint_text(text, path, job.settings).findings
    return out


def unwritten(out: Outcome, text: str, job: Job, problem: str) -> None:
    """The fixed text of `out` could not be written (read-only, disk full, changed
    meanwhile): the file still has `text`, and so all of its findings."""
    from ptlint.engine.lint import lint_text

    result = lint_text(text, out.path, job.settings)
    out.findings = result.findings
    out.errors = [*out.errors, *(e for e in result.errors if e not in out.errors), problem]
    out.text = text
    out.fixed = 0
    out.new_text = None
