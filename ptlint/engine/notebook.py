"""Jupyter notebooks: the code cells of an `.ipynb` are linted and fixed as one module.

The code cells are joined in order, so a name defined in one cell is known in the
next. IPython syntax (magics, shell escapes, `?` help, auto-call) is masked with a
placeholder statement of the same line count before parsing and put back untouched
afterwards. A cell that still does not parse gets a `PTL000` finding and is left out
of the module, so the other cells are still linted.

Positions are mapped back to (cell index in the notebook's `cells`, line and column
within the cell). Writing a fixed notebook changes only the `source` of the changed
code cells: every other byte of the file stays as it was.
"""
from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ptlint.engine.fix import MAX_FIX_PASSES, add_imports, apply_edits, non_overlapping
from ptlint.engine.guard import fits_oldest_python, parse, round_trips, syntax_error, too_deep
from ptlint.engine.job import Job, Outcome
from ptlint.engine.lint import LintResult, lint_text
from ptlint.io.cache import Cache
from ptlint.io.diff import cell_diff
from ptlint.io.ipython import Masked, free_marker, lines_of, mask, placeholders, unmask
from ptlint.io.notebook import Notebook, NotebookError
from ptlint.io.text import Source, line_starts, write_fixed
from ptlint.model import Edit, Finding, Fix, Position, Span, cell_label

if TYPE_CHECKING:
    from ptlint.config import Settings

_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


# -- linting the cells as one module ----------------------------------------------
@dataclass
class _Cell:
    index: int  # in the notebook's `cells`
    source: str  # as in the notebook
    masked: Masked
    text: str  # what goes into the module: the masked text ending with a line break


def _valid_alone(text: str) -> bool:
    """Whether the cell parses by itself (CPython's parser first: it is much cheaper)."""
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT, dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    try:  # LibCST may know syntax newer than this interpreter
        parse(text)
        return True
    except Exception:  # noqa: BLE001
        return False


def _compiles(text: str) -> bool:
    try:
        parse(text)
        compile(text, "<cell>", "exec", _TOP_LEVEL_AWAIT, dont_inherit=True)
    except Exception:  # noqa: BLE001 - anything that does not compile
        return False
    return True


def _verdict(text: str) -> tuple[bool, bool]:
    """(compiles, fits the oldest Python supported): what a fix must not take away."""
    compiles = _compiles(text)
    return compiles, compiles and fits_oldest_python(text)


class Layout:
    """The joined module, and where each cell sits in it."""

    def __init__(self, texts: list[str]) -> None:
        self.joined = "".join(texts)
        self.first_lines: list[int] = []  # 1-based line of the module where each cell starts
        line = 1
        for text in texts:
            self.first_lines.append(line)
            line += len(lines_of(text))  # every text ends with a line break (or is empty)
        self._starts: tuple[int, ...] | None = None

    def locate(self, pos: Position, *, end: bool = False) -> tuple[int, Position]:
        """(cell number, position within the cell) of a module position. An end
        position at the very start of a cell belongs to the cell before it."""
        k = bisect.bisect_right(self.first_lines, pos.line) - 1
        if end and pos.column == 0:
            while k > 0 and self.first_lines[k] == pos.line:
                k -= 1
        k = max(k, 0)
        return k, Position(pos.line - self.first_lines[k] + 1, pos.column)

    def map_edits(self, edits: Iterable[Edit]) -> list[tuple[int, Edit]] | None:
        """Each edit in the coordinates of its cell; None if one crosses cells.

        A rule that moves statements at the top level rewrites the whole module
        body: such an edit is first narrowed to the lines it really changes."""
        out = []
        for edit in edits:
            mapped = self._map(edit)
            if mapped is None:
                narrow = self._narrow(edit)
                mapped = None if narrow is None else self._map(narrow, strict=True)
                if mapped is None:
                    return None
            out.append(mapped)
        return out

    def _map(self, edit: Edit, *, strict: bool = False) -> tuple[int, Edit] | None:
        k, start = self.locate(edit.start)
        if edit.end == edit.start:
            # an insertion where one cell ends and the next begins could go to either:
            # a narrowed edit there says nothing about which one the rule meant
            if strict and self.locate(edit.start, end=True)[0] != k:
                return None
            return k, Edit(start, start, edit.content)
        k_end, end = self.locate(edit.end, end=True)
        if k_end != k:
            return None
        return k, Edit(start, end, edit.content)

    def _narrow(self, edit: Edit) -> Edit | None:
        """The same change as `edit`, without the whole lines it leaves as they are."""
        if self._starts is None:
            self._starts = line_starts(self.joined)
        starts = self._starts

        def offset(pos: Position) -> int:
            return starts[pos.line - 1] + pos.column

        begin, end = offset(edit.start), offset(edit.end)
        old, new = lines_of(self.joined[begin:end]), lines_of(edit.content)
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        if head == 0 and tail == 0:
            return None
        begin += sum(len(s) for s in old[:head])
        end -= sum(len(s) for s in old[len(old) - tail:])
        content = "".join(new[head:len(new) - tail])

        def position(at: int) -> Position:
            line = bisect.bisect_right(starts, at) - 1
            return Position(line + 1, at - starts[line])

        return Edit(position(begin), position(end), content)


def _prepare(nb: Notebook, path: str, settings: "Settings"
             ) -> tuple[list[_Cell], list[Finding], list[str]]:
    """The cells that go into the module; PTL000 for the cells that are not valid
    Python (a syntax error, a null byte, too deep a nesting) and an error line
    for those only LibCST cannot take: both are left out, the others linted."""
    cells: list[_Cell] = []
    broken: list[Finding] = []
    errors: list[str] = []
    next_id = 0
    code_cells = nb.code_cells()
    marker = free_marker([source for _, source in code_cells])
    for index, source in code_cells:
        masked = mask(source, next_id, marker)
        if masked is None:
            continue  # %%bash, %%writefile, ...: not Python
        next_id += len(masked.magics) + 1
        text = masked.text
        if text and not text.endswith(("\n", "\r")):
            text += "\n"
        where = f"{path}:{cell_label(index)}"
        problem = too_deep(text, where, "cell")  # before LibCST sees it: it could crash
        if problem is None and not _valid_alone(text):
            try:
                parse(text)
            except Exception as exc:  # noqa: BLE001 - any parser failure is a syntax error
                problem = syntax_error(where, exc, text, "cell")
        if isinstance(problem, str):
            errors.append(problem)
        elif problem is not None:
            if settings.is_enabled(problem.code, path):
                span = Span(masked.shift(problem.span.start), masked.shift(problem.span.end))
                broken.append(replace(problem, path=path, span=span, cell=index))
        else:
            cells.append(_Cell(index, source, masked, text))
    return cells, broken, errors


def _joined_parses(cells: list[_Cell]) -> list[_Cell]:
    """The cells, less any whose text breaks the joined module (LibCST and CPython
    disagreeing on a cell is rare: then each cell is parsed with LibCST)."""
    try:
        parse("".join(c.text for c in cells))
        return cells
    except Exception:  # noqa: BLE001
        pass
    good = []
    for cell in cells:
        try:
            parse(cell.text)
            good.append(cell)
        except Exception:  # noqa: BLE001
            continue
    return good


def _to_cells(findings: list[Finding], layout: Layout, cells: list[_Cell]) -> list[Finding]:
    """Findings in the coordinates of the notebook's cells. A fix's edits are given
    in the coordinates of the cell each edit is in (as ruff does)."""
    out = []
    for f in findings:
        k, start = layout.locate(f.span.start)
        k_end, end = layout.locate(f.span.end, end=True)
        if k_end != k:  # a node spanning cells: stop at the end of the first
            lines = lines_of(cells[k].text)
            end = Position(max(len(lines), 1), len(lines[-1].rstrip("\r\n")) if lines else 0)
        shift = cells[k].masked.shift
        fix = f.fix
        if fix is not None:
            mapped = _cell_edits(layout, cells, fix.edits)
            fix = None if mapped is None else replace(fix, edits=tuple(
                Edit(cells[j].masked.shift(e.start), cells[j].masked.shift(e.end), e.content)
                for j, e in mapped
            ))
        out.append(replace(f, span=Span(shift(start), shift(end)), fix=fix, cell=cells[k].index))
    return out


def _cell_edits(layout: Layout, cells: list[_Cell], edits: Iterable[Edit]
                ) -> list[tuple[int, Edit]] | None:
    """The edits in the coordinates of their cells, or None when the fix cannot be
    applied: an edit crosses cells, or changes the lines of a cell IPython dedents
    (its lines must stay where they are to get their indentation back)."""
    mapped = layout.map_edits(edits)
    if mapped is None:
        return None
    for k, edit in mapped:
        if cells[k].masked.dedented and (
            edit.start.line != edit.end.line or "\n" in edit.content or "\r" in edit.content
        ):
            return None
    return mapped


# -- fixing ----------------------------------------------------------------------
def _apply(texts: list[str], cells: list[_Cell], fixes: list[tuple[Fix, list[tuple[int, Edit]]]],
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


def _import_cell(texts: list[str], cells: list[_Cell], first_touched: int) -> int | None:
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


def _fix(cells: list[_Cell], path: str, settings: "Settings", *, unsafe: bool,
         first: LintResult | None = None) -> tuple[list[str], int, LintResult, list[str]]:
    """Apply allowed fixes until nothing changes; the module's texts per cell, the
    number of fixes applied, what remains (module coordinates) and errors. `first`:
    the lint of the cells as they are, when the caller has it."""
    texts = [c.text for c in cells]
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
            result = lint_text(layout.joined, path, settings)
        mapped: dict[int, tuple[Finding, list[tuple[int, Edit]]]] = {}
        for f in result.findings:
            if f.fix is None or (f.code, f.span) in rejected or not settings.fix_allowed(
                f.code, f.fix.safety, unsafe=unsafe
            ):
                continue
            edits = _cell_edits(layout, cells, f.fix.edits)
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
        texts = new
    layout = Layout(texts)
    result = lint_text(layout.joined, path, settings)
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
        if compiled and not _compiles(new):
            return False
        if fitted and not fits_oldest_python(new):
            return False
    return True


def _restore(cell: _Cell, text: str) -> str:
    """The cell's new source: magics put back, the added line break taken off."""
    if text.endswith(("\n", "\r")) and not cell.source.endswith(("\n", "\r")):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    return unmask(text, cell.masked)


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
    if cached is not None and (job.mode == "check" or not any(
        f.fix and settings.fix_allowed(f.code, f.fix.safety, unsafe=job.unsafe) for f in cached
    )):
        out.findings = cached
        return out

    cells, broken, skipped = _prepare(nb, name, settings)
    if not settings.is_enabled("PTL000", name):
        cells = _joined_parses(cells)  # no PTL000 would tell that the module does not parse
    layout = Layout([c.text for c in cells])
    timings: dict[str, float] | None = {} if job.timings else None
    first = lint_text(layout.joined, name, settings, timings=timings)
    out.timings = timings or {}
    if any(f.code == "PTL000" for f in first.findings):
        # every cell compiles, yet LibCST rejects the module: find the cells it rejects
        cells = _joined_parses(cells)
        layout = Layout([c.text for c in cells])
        first = lint_text(layout.joined, name, settings)

    def in_cells(findings: list[Finding], texts: list[str] | None = None) -> list[Finding]:
        where = layout if texts is None else Layout(texts)
        return sorted(broken + _to_cells(findings, where, cells), key=lambda f: f.sort_key)

    def errors_in_cells(errors: list[str], texts: list[str] | None = None) -> list[str]:
        where = layout if texts is None else Layout(texts)
        return [*skipped, *(_error_in_cells(e, name, where, cells) for e in errors)]

    if job.mode == "check" or not cells:
        out.findings = in_cells(first.findings)
        out.errors = errors_in_cells(first.errors)
        if cache and not out.errors:
            cache.put(key, out.findings)
        return out

    texts, applied, result, errors = _fix(cells, name, settings, unsafe=job.unsafe, first=first)
    changed = {}
    for cell, text in zip(cells, texts):
        new = _restore(cell, text)
        if new != cell.source:
            changed[cell.index] = new
    if not changed:
        out.findings = in_cells(result.findings, texts)
        out.errors = errors_in_cells(result.errors, texts)
        if cache and not out.errors:
            cache.put(key, out.findings)
        return out
    try:
        new_text = nb.with_sources(changed)
    except NotebookError as exc:
        out.findings = in_cells(first.findings)
        out.errors = [*errors_in_cells(first.errors), *errors, f"{name}: {exc}; not written"]
        return out
    out.fixed = applied
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
            return out
    out.findings = in_cells(result.findings, texts)
    out.errors = errors_in_cells(result.errors, texts)
    out.cells = {**out.cells, **changed}
    out.text = new_text
    return out


_AT_LINE = re.compile(r"(\d+): ")


def _error_in_cells(error: str, name: str, layout: Layout, cells: list[_Cell]) -> str:
    """An error line that names a line of the joined module names the cell instead."""
    match = _AT_LINE.match(error, len(name) + 1) if error.startswith(f"{name}:") else None
    if match is None or not cells:
        return error
    k, where = layout.locate(Position(int(match.group(1)), 0))
    return f"{name}:{cell_label(cells[k].index)}:{where.line}: {error[match.end():]}"
