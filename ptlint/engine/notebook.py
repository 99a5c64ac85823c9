"""Jupyter notebooks: the code cells of an `.ipynb` are linted and fixed as one module.

The code cells are joined in order, so a name defined in one cell is known in the
next. IPython syntax (magics, shell escapes, `?` help, auto-call) is masked with a
placeholder statement of the same line count before parsing and put back untouched
afterwards. A cell that still does not parse gets a `PTL000` finding and is left out
of the module, so the other cells are still linted.

Positions are mapped back to (cell index in the notebook's `cells`, line and column
within the cell): `cells` does the joining and the mapping; this module fixes, and
`lint_cells` is what the file runner and the language server share. Writing a fixed notebook changes only the `source` of the changed
code cells: every other byte of the file stays as it was.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ptlint.engine.cells import (Cell, Layout, cell_edits, compiles, error_in_cells, joined_parses,
                                 notice_in_cells, prepare, to_cells)
from ptlint.engine.fix import MAX_FIX_PASSES, add_imports, non_overlapping
from ptlint.io.text import apply_edits, lines_of
from ptlint.engine.guard import fits_oldest_python, round_trips
from ptlint.engine.job import Job, Outcome, usable
from ptlint.engine.lint import LintResult, lint_text
from ptlint.engine.suppress import Notice, noqa_edits
from ptlint.io.cache import Cache
from ptlint.io.diff import cell_diff
from ptlint.io.ipython import placeholders, unmask
from ptlint.io.notebook import Notebook, NotebookError
from ptlint.io.text import Source, write_fixed
from ptlint.model import Edit, Finding, Fix, Span, cell_label

if TYPE_CHECKING:
    from ptlint.config import Settings


# -- fixing ----------------------------------------------------------------------
def _verdict(text: str) -> tuple[bool, bool]:
    """(compiles, fits the oldest Python supported): what a fix must not take away."""
    compiled = compiles(text)
    return compiled, compiled and fits_oldest_python(text)


def _apply(texts: list[str], cells: list[Cell], fixes: list[tuple[Fix, list[tuple[int, Edit]]]],
           first_touched: int) -> list[str] | None:
    """The cells' texts with the fixes applied; None if their imports have no place."""
    by_cell: dict[int, list[Edit]] = {}
    for _, edits in fixes:
        for k, edit in edits:
            by_cell.setdefault(k, []).append(edit)
    new = list(texts)
    for k, edits in by_cell.items():
        new[k] = _terminated(apply_edits(texts[k], edits))
    imports = sorted({i for fix, _ in fixes for i in fix.imports})
    if imports:
        # an import counts if a cell up to the first one the fixes touch makes it
        missing = _missing_imports("".join(new[: first_touched + 1]), imports)
        if missing:
            target = _import_cell(new, cells, first_touched)
            if target is None:
                return None
            new[target] = _add_imports(new[target], missing, cells[target].masked.marker)
    return new


def _missing_imports(text: str, wanted: list[str]) -> list[str]:
    """The `import a` / `from a import b` statements `text` does not make (outside
    functions and classes)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return wanted
    have: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            have |= {f"import {a.name}" for a in node.names if a.asname in (None, a.name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            have |= {f"from {node.module} import {a.name}" for a in node.names
                     if a.asname in (None, a.name)}
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return [w for w in wanted if " ".join(w.split()) not in have]


def _add_imports(text: str, imports: list[str], marker: str) -> str:
    """`add_imports` on a cell: magics at the top of the cell stay above the imports
    (as comments for the moment, so that LibCST keeps them in the module header)."""
    leading = re.compile(rf"^pass  (# {re.escape(marker)}:\d+)$")
    lines = lines_of(text)
    top = 0
    while top < len(lines) and (leading.match(lines[top].rstrip("\r\n"))
                                or not lines[top].strip()):
        top += 1
    head = [leading.sub(r"\1", line.rstrip("\r\n")) + line[len(line.rstrip("\r\n")):]
            for line in lines[:top]]
    out = add_imports("".join(head + lines[top:]), imports)
    out = re.sub(rf"^(# {re.escape(marker)}:\d+)$", r"pass  \1", out, flags=re.M)
    return _terminated(out)


def _terminated(text: str) -> str:
    """A cell's text ends with a line break, or the next cell would run into it."""
    return text + "\n" if text and not text.endswith(("\n", "\r")) else text


def _import_cell(texts: list[str], cells: list[Cell], first_touched: int) -> int | None:
    """Where missing imports go: the first cell with an import, if it comes no later
    than the first cell a fix touches; else the first cell. Never a cell IPython
    dedents (its lines cannot move), nor one LibCST does not reproduce byte for
    byte (a form feed before a statement): imports are added by printing the cell."""
    def usable(k: int) -> bool:
        return not cells[k].masked.dedented and ("\f" not in texts[k] or round_trips(texts[k]))

    for k, text in enumerate(texts[: first_touched + 1]):
        if re.search(r"^(?:import|from)\s", text, re.M) and usable(k):
            return k
    return 0 if texts and usable(0) else None


def _fix(cells: list[Cell], path: str, settings: "Settings", *, unsafe: bool,
         first: LintResult | None = None, codes: Counter[str] | None = None,
         ) -> tuple[list[str], int, LintResult, list[str]]:
    """Apply allowed fixes until nothing changes; the module's texts per cell, the
    number of fixes applied, what remains (module coordinates) and errors. `first`:
    the lint of the cells as they are, when the caller has it; `codes` counts the
    fixes applied per code."""
    texts = [c.text for c in cells]
    codes = Counter() if codes is None else codes
    valid = [_verdict(t) for t in texts]
    marker = cells[0].masked.marker if cells else ""
    applied = 0
    rejected: set[tuple[str, Span]] = set()
    errors: list[str] = []
    for _ in range(MAX_FIX_PASSES):
        layout = Layout(texts)
        if first is not None and applied == 0 and not rejected:
            result = first
        else:
            result = lint_text(layout.joined, path, settings, cells=tuple(layout.first_lines))
        mapped: dict[int, tuple[Finding, list[tuple[int, Edit]]]] = {}
        for f in result.findings:
            if f.fix is None or (f.code, f.span) in rejected or not settings.fix_allowed(
                f.code, f.fix.safety, unsafe=unsafe
            ):
                continue
            edits = cell_edits(layout, cells, f.fix.edits)
            if edits is not None:
                mapped[id(f.fix)] = (f, edits)
        chosen = non_overlapping(f.fix for f, _ in mapped.values())  # type: ignore[misc]
        if not chosen:
            result.errors[:0] = errors
            return texts, applied, result, errors
        pairs = [(fix, mapped[id(fix)][1]) for fix in chosen]
        first = min(k for _, edits in pairs for k, _ in edits)
        new = _apply(texts, cells, pairs, first)
        if new is None or not _all_ok(texts, new, valid, marker):
            for fix, edits in pairs:
                single = _apply(texts, cells, [(fix, edits)], edits[0][0])
                if single is None or not _all_ok(texts, single, valid, marker):
                    bad = mapped[id(fix)][0]
                    rejected.add((bad.code, bad.span))
                    k, where = layout.locate(bad.span.start)
                    errors.append(f"{path}:{cell_label(cells[k].index)}:{where.line}: fix for "
                                  f"{bad.code} would break the cell; not applied")
            continue
        applied += len(chosen)
        codes.update(mapped[id(fix)][0].code for fix in chosen)
        texts = new
    layout = Layout(texts)
    result = lint_text(layout.joined, path, settings, cells=tuple(layout.first_lines))
    errors.append(f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes")
    result.errors[:0] = errors
    return texts, applied, result, errors


def _all_ok(before: list[str], after: list[str], valid: list[tuple[bool, bool]],
            marker: str) -> bool:
    for old, new, (compiled, fitted) in zip(before, after, valid):
        if old == new:
            continue
        if placeholders(old, marker) != placeholders(new, marker):  # a fix must not drop or copy a magic
            return False
        if compiled and not compiles(new):
            return False
        if fitted and not fits_oldest_python(new):
            return False
    return True


def _restore(cell: Cell, text: str) -> str:
    """The cell's new source: magics put back, the added line break taken off."""
    if text.endswith(("\n", "\r")) and not cell.source.endswith(("\n", "\r")):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    return unmask(text, cell.masked)


def _changed(cells: list[Cell], texts: list[str]) -> dict[int, str]:
    """The new source of each cell whose text changed, by index in the notebook."""
    out = {}
    for cell, text in zip(cells, texts):
        new = _restore(cell, text)
        if new != cell.source:
            out[cell.index] = new
    return out


# -- what the file runner and the language server share -------------------------------
@dataclass
class CellLint:
    """A notebook's code cells linted as one module (`result` in its coordinates)."""

    path: str
    settings: "Settings"
    cells: list[Cell]
    broken: list[Finding]  # PTL000 for the cells that are not valid Python
    skipped: list[str]  # error lines for the cells only LibCST cannot take
    layout: Layout
    result: LintResult

    def in_cells(self, findings: list[Finding], texts: list[str] | None = None) -> list[Finding]:
        """Module findings (of `texts`, the cells as fixed, if given) in cell coordinates."""
        where = self.layout if texts is None else Layout(texts)
        return sorted(self.broken + to_cells(findings, where, self.cells), key=lambda f: f.sort_key)

    def errors_in_cells(self, errors: list[str], texts: list[str] | None = None) -> list[str]:
        where = self.layout if texts is None else Layout(texts)
        return [*self.skipped, *(error_in_cells(e, self.path, where, self.cells) for e in errors)]

    def pairs(self) -> list[tuple[Finding, Finding | None]]:
        """Each finding in cell coordinates, with the module finding it comes from
        (None for a cell that is not valid Python)."""
        out: list[tuple[Finding, Finding | None]] = [(f, None) for f in self.broken]
        out += zip(to_cells(self.result.findings, self.layout, self.cells), self.result.findings)
        return sorted(out, key=lambda pair: pair[0].sort_key)

    def with_fix(self, finding: Finding) -> dict[int, str] | None:
        """The new sources of the cells one module finding's fix changes, or None
        when it cannot be applied or would break a cell."""
        if finding.fix is None:
            return None
        edits = cell_edits(self.layout, self.cells, finding.fix.edits)
        if edits is None:
            return None
        texts = [c.text for c in self.cells]
        new = _apply(texts, self.cells, [(finding.fix, edits)], min(k for k, _ in edits))
        if new is None:
            return None
        valid = [(True, True) if old == text else _verdict(old) for old, text in zip(texts, new)]
        if not _all_ok(texts, new, valid, self.cells[0].masked.marker):
            return None
        return _changed(self.cells, new)

    def fix_all(self, *, unsafe: bool, codes: Counter[str] | None = None,
                ) -> tuple[dict[int, str], list[str], int, LintResult, list[str]]:
        """Every allowed fix: the changed sources, the module's texts per cell, the
        number of fixes applied, what remains (module coordinates) and errors;
        `codes` counts the fixes applied per code."""
        texts, applied, result, errors = _fix(self.cells, self.path, self.settings, unsafe=unsafe,
                                              first=self.result, codes=codes)
        return _changed(self.cells, texts), texts, applied, result, errors

    def notices(self) -> list[Notice]:
        """The module's warnings (an invalid `# noqa`), each in its cell."""
        return [notice_in_cells(n, self.layout, self.cells) for n in self.result.notices]

    def with_noqa(self) -> tuple[dict[int, str], int, list[str]]:
        """`--add-noqa`: the new sources of the cells with a `# noqa` added on each
        line with findings, how many were added, and an error for each cell left
        alone (one that does not parse, or a finding on a line of IPython syntax)."""
        errors = [f"{self.path}:{cell_label(f.cell)}:{f.span.start.line}: no `# noqa` added to "
                  "this cell: it does not parse" for f in self.broken if f.cell is not None]
        by_cell: dict[int, list[Edit]] = {}
        edits = noqa_edits(self.layout.joined, self.result.findings)
        for k, edit in cell_edits(self.layout, self.cells, edits) or ():
            by_cell.setdefault(k, []).append(edit)
        texts = [c.text for c in self.cells]
        added = 0
        for k, edits_k in by_cell.items():
            new, marker = apply_edits(texts[k], edits_k), self.cells[k].masked.marker
            if placeholders(new, marker) != placeholders(texts[k], marker):
                errors.append(f"{self.path}:{cell_label(self.cells[k].index)}: no `# noqa` added "
                              "to this cell: a finding is on a line of IPython syntax")
                continue
            texts[k] = new
            added += len(edits_k)
        return _changed(self.cells, texts), added, errors


def lint_cells(code_cells: list[tuple[int, str]], path: str, settings: "Settings", *,
               timings: dict[str, float] | None = None) -> CellLint:
    """Lint code cells, given as (index in the notebook, source), as one module."""
    cells, broken, skipped = prepare(code_cells, path, settings)
    if not settings.is_enabled("PTL000", path):
        cells = joined_parses(cells)  # no PTL000 would tell that the module does not parse
    layout = Layout([c.text for c in cells])
    first = lint_text(layout.joined, path, settings, timings=timings,
                      cells=tuple(layout.first_lines))
    if any(f.code == "PTL000" for f in first.findings):
        # every cell compiles, yet LibCST rejects the module: find the cells it rejects
        cells = joined_parses(cells)
        layout = Layout([c.text for c in cells])
        first = lint_text(layout.joined, path, settings, cells=tuple(layout.first_lines))
    return CellLint(path, settings, cells, broken, skipped, layout, first)


# -- the entry point the file runner calls ------------------------------------------------
def process(path: Path, data: bytes, job: Job, write: bool = True) -> Outcome:
    """Lint (or fix, or diff) one notebook."""
    name = str(path)
    settings = job.settings
    try:
        nb = Notebook.parse(data)
    except NotebookError as exc:
        return Outcome(name, errors=[f"{name}: invalid notebook: {exc}"])
    out = Outcome(name, text=nb.text)
    if not nb.is_python():
        return out
    out.cells = {index: source for index, source in nb.code_cells()}

    cache = Cache(settings) if job.cache and write else None
    key = cache.key(name, data) if cache else ""
    cached = cache.get(key, name) if cache else None
    if usable(cached, job):
        out.findings = cached  # type: ignore[assignment]
        return out

    timings: dict[str, float] | None = {} if job.timings else None
    linted = lint_cells(nb.code_cells(), name, settings, timings=timings)
    out.timings = timings or {}
    first, in_cells, errors_in_cells = linted.result, linted.in_cells, linted.errors_in_cells
    out.notices = linted.notices()
    if job.mode == "noqa":
        changed, out.fixed, errors = linted.with_noqa()
        out.errors = [*errors_in_cells(first.errors), *errors]
        if changed and write:
            _write(out, path, nb, changed, data)
        return out
    if job.mode == "check" or not linted.cells:
        out.findings = in_cells(first.findings)
        out.errors = errors_in_cells(first.errors)
        if cache and not out.errors and not out.notices:
            cache.put(key, out.findings)
        return out

    codes: Counter[str] = Counter()
    changed, texts, applied, result, errors = linted.fix_all(unsafe=job.unsafe, codes=codes)
    if not changed:
        out.findings = in_cells(result.findings, texts)
        out.errors = errors_in_cells(result.errors, texts)
        if cache and not out.errors and not out.notices:
            cache.put(key, out.findings)
        return out
    try:
        new_text = nb.with_sources(changed)
    except NotebookError as exc:
        out.findings = in_cells(first.findings)
        out.errors = [*errors_in_cells(first.errors), *errors, f"{name}: {exc}; not written"]
        return out
    out.fixed = applied
    out.fixed_codes = dict(codes)
    out.new_text = new_text
    if job.mode == "diff":
        out.diff = "".join(cell_diff(name, i, out.cells[i], changed[i]) for i in sorted(changed))
        out.findings = in_cells(first.findings)
        out.errors = [*errors, *errors_in_cells(first.errors)]
        return out
    if write:
        problem = write_fixed(path, Source(new_text, "utf-8", nb.bom), new_text, out.fixed,
                              original=data)
        if problem is not None:  # the notebook keeps its findings, and its text
            out.findings = in_cells(first.findings)
            out.errors = [*errors_in_cells(first.errors), *errors, problem]
            out.fixed = 0
            out.fixed_codes = {}
            return out
    out.findings = in_cells(result.findings, texts)
    out.errors = errors_in_cells(result.errors, texts)
    out.cells = {**out.cells, **changed}
    out.text = new_text
    return out


def _write(out: Outcome, path: Path, nb: Notebook, changed: dict[int, str], data: bytes) -> None:
    """Write `--add-noqa`'s cells (a notebook changed meanwhile is not overwritten)."""
    try:
        new_text = nb.with_sources(changed)
    except NotebookError as exc:
        out.errors.append(f"{out.path}: {exc}; not written")
        out.fixed = 0
        return
    problem = write_fixed(path, Source(new_text, "utf-8", nb.bom), new_text, out.fixed,
                          original=data)
    if problem is not None:
        out.errors.append(problem)
        out.fixed = 0
