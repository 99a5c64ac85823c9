"""A notebook's code cells as one module: which cells go in (IPython syntax masked,
cells that are not valid Python left out with a PTL000), where each cell sits in
the joined module, and findings, edits and error lines mapped back to
(cell, line, column)."""
from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable

from ptlint.engine.guard import parse, syntax_error, too_deep
from ptlint.engine.suppress import Notice
from ptlint.io.ipython import Masked, free_marker, mask
from ptlint.io.text import line_starts, lines_of
from ptlint.model import Edit, Finding, Position, Span, cell_label

if TYPE_CHECKING:
    from ptlint.config import Settings

_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


@dataclass
class Cell:
    index: int  # in the notebook's `cells`
    source: str  # as in the notebook
    masked: Masked
    text: str  # what goes into the module: the masked text ending with a line break


def valid_alone(text: str) -> bool:
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


def compiles(text: str) -> bool:
    try:
        parse(text)
        compile(text, "<cell>", "exec", _TOP_LEVEL_AWAIT, dont_inherit=True)
    except Exception:  # noqa: BLE001 - anything that does not compile
        return False
    return True


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


def prepare(code_cells: list[tuple[int, str]], path: str, settings: "Settings"
            ) -> tuple[list[Cell], list[Finding], list[str]]:
    """The cells that go into the module; PTL000 for the cells that are not valid
    Python (a syntax error, a null byte, too deep a nesting) and an error line
    for those only LibCST cannot take: both are left out, the others linted."""
    cells: list[Cell] = []
    broken: list[Finding] = []
    errors: list[str] = []
    next_id = 0
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
        if problem is None and not valid_alone(text):
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
            cells.append(Cell(index, source, masked, text))
    return cells, broken, errors


def joined_parses(cells: list[Cell]) -> list[Cell]:
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


def to_cells(findings: list[Finding], layout: Layout, cells: list[Cell]) -> list[Finding]:
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
            mapped = cell_edits(layout, cells, fix.edits)
            fix = None if mapped is None else replace(fix, edits=tuple(
                Edit(cells[j].masked.shift(e.start), cells[j].masked.shift(e.end), e.content)
                for j, e in mapped
            ))
        out.append(replace(f, span=Span(shift(start), shift(end)), fix=fix, cell=cells[k].index))
    return out


def cell_edits(layout: Layout, cells: list[Cell], edits: Iterable[Edit]
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


_AT_LINE = re.compile(r"(\d+): ")


def notice_in_cells(notice: Notice, layout: Layout, cells: list[Cell]) -> Notice:
    """A warning about the joined module, at its place in its cell."""
    if not cells:
        return notice
    k, at = layout.locate(notice.span.start)
    at = cells[k].masked.shift(at)
    return replace(notice, span=Span(at, at), cell=cells[k].index)


def error_in_cells(error: str, name: str, layout: Layout, cells: list[Cell]) -> str:
    """An error line that names a line of the joined module names the cell instead."""
    match = _AT_LINE.match(error, len(name) + 1) if error.startswith(f"{name}:") else None
    if match is None or not cells:
        return error
    k, where = layout.locate(Position(int(match.group(1)), 0))
    return f"{name}:{cell_label(cells[k].index)}:{where.line}: {error[match.end():]}"
