"""One file's work: what is asked (`Job`) and what comes back (`Outcome`), and
the lint or fix of one module's text that the `.py`, notebook, stdin and editor
paths share."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ptlint.config import Settings
from ptlint.config_files import Configs
from ptlint.engine.suppress import Notice, noqa_edits
from ptlint.io.text import DecodeError
from ptlint.model import SYNTAX_ERROR, Finding, Position, Span

Mode = Literal["check", "fix", "diff", "noqa"]  # noqa: --add-noqa


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
    notices: list[Notice] = field(default_factory=list)  # warnings: invalid `# noqa`
    fixed_codes: dict[str, int] = field(default_factory=dict)  # --fix: fixes per code


@dataclass
class Job:
    settings: Settings
    mode: Mode = "check"
    unsafe: bool = False
    cache: bool = True
    timings: bool = False
    configs: Configs | None = None  # each file's own settings (hierarchical configuration)
    _per_settings: dict[int, "Job"] = field(default_factory=dict, repr=False, compare=False)

    def for_file(self, path: Path | str) -> "Job":
        """This job with the settings of the file's own configuration."""
        if self.configs is None:
            return self
        settings = self.configs.for_path(Path(path))
        if settings is self.settings:
            return self
        job = self._per_settings.get(id(settings))
        if job is None:
            job = self._per_settings[id(settings)] = replace(
                self, settings=settings, unsafe=bool(settings.unsafe_fixes), configs=None,
                _per_settings={})
        return job


def usable(cached: list[Finding] | None, job: Job) -> bool:
    """Whether cached findings answer the job: always when checking; when
    fixing, only if none of them has a fix to apply; when adding `# noqa`, only
    if there is none."""
    if cached is None:
        return False
    if job.mode == "noqa":
        return not cached
    return job.mode == "check" or not any(
        f.fix and job.settings.fix_allowed(f.code, f.fix.safety, unsafe=job.unsafe)
        for f in cached
    )


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
    if job.mode in ("check", "noqa"):
        result = lint_text(text, path, job.settings, timings=timings)
        out = Outcome(path, result.findings, result.errors, text, timings=timings or {},
                      notices=result.notices)
        if job.mode == "noqa":
            add_noqa(out, text)
        return out
    started = time.perf_counter()
    fixed = fix_text(text, path, job.settings, unsafe=job.unsafe)
    if timings is not None:
        timings["fix (all passes)"] = time.perf_counter() - started
    out = Outcome(path, fixed.result.findings, fixed.result.errors, fixed.text,
                  fixed=fixed.applied, timings=timings or {}, notices=fixed.result.notices,
                  fixed_codes=dict(fixed.codes))
    if fixed.text != text:
        out.new_text = fixed.text
        if job.mode == "diff":
            from ptlint.io.diff import unified_diff  # (difflib: only for --diff)

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


def add_noqa(out: Outcome, text: str) -> None:
    """`--add-noqa` on a module: `out.new_text` gets a directive on each line with
    findings (`out.fixed` counts them); the findings it covers leave `out`. A file
    that does not parse is left as it is, with an error."""
    from ptlint.io.text import apply_edits
    from ptlint.engine.guard import python_verdict, valid

    broken = [f for f in out.findings if f.code == SYNTAX_ERROR[0]]
    if broken:
        out.errors.append(f"{out.path}:{broken[0].span.start.line}: no `# noqa` added: "
                          "the file does not parse")
        out.findings = []
        return
    edits = noqa_edits(text, out.findings)
    out.findings = []
    if not edits:
        return
    new = apply_edits(text, edits)
    if not valid(new, out.path, compiles=python_verdict(text, full=True) is None):
        out.errors.append(f"{out.path}: adding `# noqa` would break the file; not changed")
        return
    out.new_text, out.fixed = new, len(edits)
