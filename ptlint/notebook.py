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
import difflib
import json
import re
from dataclasses import dataclass, replace
from json.decoder import scanstring
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable


from ptlint.engine import (
    MAX_FIX_PASSES,
    LintResult,
    _syntax_error,
    add_imports,
    apply_edits,
    lint_text,
    non_overlapping,
    parse,
)
from ptlint.model import Edit, Finding, Fix, Position, Span
from ptlint.textio import Source, line_starts

if TYPE_CHECKING:
    from ptlint.config import Settings
    from ptlint.runner import Job, Outcome

# Cell magics whose body is Python run in the kernel; any other cell magic
# (%%bash, %%writefile, %%html, ...) makes the cell something else: it is skipped.
PYTHON_CELL_MAGICS = frozenset({
    "time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy",
})

_PLACEHOLDER = "pass  # ptlint-magic:{}"
_PLACEHOLDER_LINE = re.compile(r"^([ \t]*)pass  # ptlint-magic:(\d+)$")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_MAGIC_ASSIGN = re.compile(r"^[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[!%]")
_CELL_MAGIC = re.compile(r"^%%(\w+)")
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


class NotebookError(Exception):
    """The file is not a notebook we can read; the message says why."""


# -- IPython syntax ---------------------------------------------------------------
def _lines(text: str) -> list[str]:
    """Lines with their line breaks (\\r\\n, \\r and \\n, like the tokenizer)."""
    return _LINE.findall(text)


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


@dataclass
class _Scan:
    """Just enough of a tokenizer to know where a logical line starts."""

    depth: int = 0  # open brackets
    string: str | None = None  # the quote of an open string
    continued: bool = False  # the previous line ended with a backslash

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and self.string is None and not self.continued

    def feed(self, line: str) -> str:
        """Advance over one physical line; return its last code character."""
        last = ""
        code = _body(line)
        i, n = 0, len(code)
        escaped_newline = False
        while i < n:
            c = code[i]
            if self.string is not None:
                if c == "\\":
                    escaped_newline = i + 1 == n and line != code
                    i += 2
                    continue
                if code.startswith(self.string, i):
                    i += len(self.string)
                    self.string = None
                    last = c
                    continue
                i += 1
                continue
            if c == "#":
                break
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif c in "\"'":
                self.string = c * 3 if code.startswith(c * 3, i) else c
                i += len(self.string)
                continue
            if not c.isspace():
                last = c
            i += 1
        if self.string is not None and len(self.string) == 1 and not escaped_newline:
            self.string = None  # an unterminated one-line string: a syntax error anyway
        self.continued = self.string is None and last == "\\"
        return last


def _is_magic(code: str) -> bool:
    """Whether a logical line (without its indentation) is IPython syntax."""
    if not code:
        return False
    # %magic, %%magic, !shell, !!shell, ?help, and auto-call (/f x, ,f x, ;f x):
    # none of them can start a Python statement.
    return code[0] in "%!?/,;" or _MAGIC_ASSIGN.match(code) is not None


@dataclass
class Masked:
    text: str  # the cell's text, IPython syntax replaced by placeholders
    magics: dict[int, tuple[str, str, bool]]  # id -> (original line, indent, first line)
    # IPython removes the first line's indentation from every line that starts
    # with it: the prefix, and the (1-based) lines it was taken from.
    dedent: str = ""
    dedented: frozenset[int] = frozenset()

    def shift(self, pos: Position) -> Position:
        """A position in `text` as a position in the cell's source."""
        if pos.line in self.dedented:
            return Position(pos.line, pos.column + len(self.dedent))
        return pos


# Could a line of the cell be IPython syntax? If not (most cells), nothing to scan.
_MAYBE_IPYTHON = re.compile(r"^[ \t\f]*[%!?/,;]|\?[ \t\f]*(?:#[^\r\n]*)?\r?$|=\s*[!%]", re.M)


def mask(source: str, next_id: int = 0) -> Masked | None:
    """The cell's Python, with IPython lines masked; None for a non-Python cell magic."""
    blank = source[: len(source) - len(source.lstrip())]
    if not _MAYBE_IPYTHON.search(source) and not re.split(r"\r\n|\r|\n", blank)[-1]:
        return Masked(source, {})  # nothing to mask, nothing to dedent: most cells
    return _mask(source, next_id)


def _mask(source: str, next_id: int) -> Masked | None:
    lines = _lines(source)
    out: list[str] = []
    magics: dict[int, tuple[str, str, bool]] = {}
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    dedent, dedented = "", set()
    if first is not None and lines[first][:1] in (" ", "\t"):
        dedent = _indent(lines[first])
        for number, line in enumerate(lines):
            if number >= first and line.startswith(dedent):
                lines[number] = line[len(dedent):]
                dedented.add(number + 1)
    if first is not None:
        match = _CELL_MAGIC.match(lines[first].lstrip(" \t"))
        if match and match.group(1) not in PYTHON_CELL_MAGICS:
            return None
    scan = _Scan()
    magic_continues = False
    for line in lines:
        code = _body(line)
        ending = line[len(code):]
        stripped = code.lstrip(" \t")
        if magic_continues or (scan.at_start and _is_magic(stripped)):
            indent = magics[next_id - 1][1] if magic_continues else _indent(code)
            magics[next_id] = (code, indent, not magic_continues)
            out.append(indent + _PLACEHOLDER.format(next_id) + ending)
            next_id += 1
            magic_continues = code.endswith("\\")
            continue
        if scan.at_start:
            trial = _Scan()
            last = trial.feed(line)
            if last == "?" and trial.at_start:  # `obj?`, `obj??`: help
                magics[next_id] = (code, _indent(code), True)
                out.append(_indent(code) + _PLACEHOLDER.format(next_id) + ending)
                next_id += 1
                continue
        scan.feed(line)
        out.append(line)
    return Masked("".join(out), magics, dedent, frozenset(dedented))


def unmask(text: str, masked: Masked) -> str:
    """Put the masked lines back (a placeholder a fix re-indented takes the new
    indent) and the indentation IPython would remove."""
    out = []
    for number, line in enumerate(_lines(text), 1):
        code = _body(line)
        match = _PLACEHOLDER_LINE.match(code)
        if match and int(match.group(2)) in masked.magics:
            original, indent, first = masked.magics[int(match.group(2))]
            if first and match.group(1) != indent:
                original = match.group(1) + original.lstrip(" \t")
            line = original + line[len(code):]
        out.append(masked.dedent + line if number in masked.dedented else line)
    return "".join(out)


def _placeholders(text: str) -> list[int]:
    return sorted(int(m.group(1)) for m in re.finditer(r"# ptlint-magic:(\d+)\r?$", text, re.M))


# -- the notebook file ------------------------------------------------------------
@dataclass
class _Style:
    """How json.dumps reproduces the file byte for byte."""

    indent: int | str | None
    separators: tuple[str, str]
    ensure_ascii: bool
    newline: str
    tail: str


@dataclass
class Notebook:
    text: str  # decoded, without BOM
    bom: bool
    data: dict[str, Any]

    @classmethod
    def parse(cls, raw: bytes) -> "Notebook":
        bom = raw.startswith(b"\xef\xbb\xbf")
        try:
            text = raw[3:].decode("utf-8") if bom else raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not UTF-8 (byte {exc.start}: {exc.reason})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotebookError(
                f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except RecursionError:
            raise NotebookError("not JSON: too deeply nested") from None
        if not isinstance(data, dict):
            raise NotebookError("the top level is not a JSON object")
        version = data.get("nbformat")
        if version != 4:
            if version is None:
                raise NotebookError("no `nbformat` version (only nbformat 4 is supported)")
            raise NotebookError(f"nbformat {version!r} is not supported (only nbformat 4)")
        cells = data.get("cells")
        if not isinstance(cells, list):
            raise NotebookError("no `cells` list")
        for index, cell in enumerate(cells):
            if not isinstance(cell, dict):
                raise NotebookError(f"cell {index} is not a JSON object")
            if not isinstance(cell.get("cell_type"), str):
                raise NotebookError(f"cell {index} has no `cell_type`")
            source = cell.get("source")
            if not (isinstance(source, str) or (
                isinstance(source, list) and all(isinstance(s, str) for s in source)
            )):
                raise NotebookError(f"cell {index}: `source` is neither a string nor a list of strings")
        return cls(text, bom, data)

    @property
    def cells(self) -> list[dict[str, Any]]:
        return self.data["cells"]

    def is_python(self) -> bool:
        meta = self.data.get("metadata")
        if not isinstance(meta, dict):
            return True
        for key, field_ in (("language_info", "name"), ("kernelspec", "language")):
            value = meta.get(key)
            if isinstance(value, dict) and isinstance(value.get(field_), str):
                if not value[field_].lower().startswith(("python", "ipython")):
                    return False
        return True

    def code_cells(self) -> list[tuple[int, str]]:
        """(index, source text) of the code cells written in Python."""
        out = []
        for index, cell in enumerate(self.cells):
            if cell["cell_type"] != "code":
                continue
            meta = cell.get("metadata")
            language = meta.get("vscode", {}).get("languageId") if isinstance(meta, dict) and \
                isinstance(meta.get("vscode"), dict) else None
            if isinstance(language, str) and language.lower() != "python":
                continue
            out.append((index, source_text(cell["source"])))
        return out

    # -- writing --------------------------------------------------------------
    def with_sources(self, changed: dict[int, str]) -> str:
        """The file's text with the `source` of the cells in `changed` replaced."""
        changed = {i: text for i, text in changed.items()
                   if source_text(self.cells[i]["source"]) != text}
        if not changed:
            return self.text
        data = json.loads(self.text)  # a fresh copy, in the file's key order
        for index, text in changed.items():
            cell = data["cells"][index]
            cell["source"] = source_value(text, cell["source"])
        style = self._style()
        if style is not None:
            new = _dump(data, style)
        else:
            new = self._splice(changed)
        if json.dumps(json.loads(new)) != json.dumps(data):  # say exactly what we meant
            raise NotebookError("internal error: rewritten notebook does not round-trip")
        return new

    def encode(self, text: str) -> bytes:
        data = text.encode("utf-8")
        return b"\xef\xbb\xbf" + data if self.bom else data

    def _ascii(self) -> bool:
        """Whether to escape non-ASCII characters (json.dumps' ensure_ascii): a file
        that has none raw (escaped, or none at all) stays all ASCII."""
        return self.text.isascii()

    def _style(self) -> _Style | None:
        text = self.text
        body = text.rstrip(" \t\r\n")
        tail = text[len(body):]
        newline = "\r\n" if "\r\n" in body else "\n"
        match = re.match(r"\{\r?\n([ \t]*)\"", body)
        candidates: list[tuple[int | str | None, tuple[str, str]]] = []
        if match:
            unit = match.group(1)
            indent: int | str = len(unit) if set(unit) <= {" "} else unit
            candidates.append((indent, (",", ": ")))
            candidates.append((indent, (", ", ": ")))
        else:
            candidates += [(None, (", ", ": ")), (None, (",", ":"))]
        ascii_ = self._ascii()
        for indent, separators in candidates:
            style = _Style(indent, separators, ascii_, newline, tail)
            if _dump(self.data, style) == text:
                return style
        return None

    def _splice(self, changed: dict[int, str]) -> str:
        spans = _source_spans(self.text)
        ascii_ = self._ascii()
        unit = re.match(r"\{\r?\n([ \t]*)\"", self.text)
        unit_text = unit.group(1) if unit else " "
        newline = "\r\n" if "\r\n" in self.text else "\n"
        out, last = [], 0
        for index in sorted(changed):
            start, end = spans[index]
            value = source_value(changed[index], self.cells[index]["source"])
            old = self.text[start:end]
            out.append(self.text[last:start])
            out.append(_format_source(value, old, self.text, start, unit_text, newline, ascii_))
            last = end
        out.append(self.text[last:])
        return "".join(out)


def _dump(data: Any, style: _Style) -> str:
    text = json.dumps(data, indent=style.indent, separators=style.separators,
                      ensure_ascii=style.ensure_ascii)
    if style.newline != "\n":
        text = text.replace("\n", style.newline)  # JSON strings never hold a raw newline
    return text + style.tail


def source_text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)


def source_value(text: str, like: str | list[str]) -> str | list[str]:
    """`text` in the form (string or list of lines) of `like`."""
    if isinstance(like, str):
        return text
    return re.findall(r"[^\n]*\n|[^\n]+$", text)  # split as Jupyter does: on "\n" only


def _format_source(value: str | list[str], old: str, text: str, start: int, unit: str,
                   newline: str, ascii_: bool) -> str:
    def dump(s: str) -> str:
        return json.dumps(s, ensure_ascii=ascii_)

    if isinstance(value, str):
        return dump(value)
    if not value:
        return "[]"
    head = re.match(r"\[(\s*)\"", old)
    if head and ("\n" in head.group(1) or "\r" in head.group(1)):  # one line per element
        item = head.group(1)
        close = re.search(r"(\s*)\]$", old).group(1)  # type: ignore[union-attr]
    elif head:  # all on one line
        sep = ", " if re.search(r"\",\s", old) else ","
        return "[" + sep.join(dump(s) for s in value) + "]"
    else:  # was empty: nbformat's layout, one level deeper than the key
        line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
        key_indent = _indent(text[line_start:start])
        item = newline + key_indent + unit
        close = newline + key_indent
    return "[" + item + ("," + item).join(dump(s) for s in value) + close + "]"


_WS = re.compile(r"[ \t\n\r]*")


def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """Offsets of the value of each cell's `source` in the file's text."""
    decoder = json.JSONDecoder()

    def ws(i: int) -> int:
        return _WS.match(text, i).end()  # type: ignore[union-attr]

    def members(i: int, on_value) -> int:
        """Walk an object starting at text[i] == '{'; return the offset after it."""
        i = ws(i + 1)
        if text[i] == "}":
            return i + 1
        while True:
            key, i = scanstring(text, i + 1)
            i = ws(i)
            i = ws(i + 1)  # the colon
            i = on_value(key, i)
            i = ws(i)
            if text[i] == "}":
                return i + 1
            i = ws(i + 1)  # the comma

    def skip(i: int) -> int:
        return decoder.raw_decode(text, i)[1]

    spans: dict[int, tuple[int, int]] = {}

    def cell_value(index: int):
        def on_value(key: str, i: int) -> int:
            end = skip(i)
            if key == "source":
                spans[index] = (i, end)
            return end
        return on_value

    def top_value(key: str, i: int) -> int:
        if key != "cells" or text[i] != "[":
            return skip(i)
        spans.clear()
        i = ws(i + 1)
        index = 0
        if text[i] == "]":
            return i + 1
        while True:
            i = members(i, cell_value(index))
            index += 1
            i = ws(i)
            if text[i] == "]":
                return i + 1
            i = ws(i + 1)

    members(ws(0), top_value)
    return spans


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


class Layout:
    """The joined module, and where each cell sits in it."""

    def __init__(self, texts: list[str]) -> None:
        self.joined = "".join(texts)
        self.first_lines: list[int] = []  # 1-based line of the module where each cell starts
        line = 1
        for text in texts:
            self.first_lines.append(line)
            line += len(_lines(text))  # every text ends with a line break (or is empty)
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
        old, new = _lines(self.joined[begin:end]), _lines(edit.content)
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


def _prepare(nb: Notebook, path: str, settings: "Settings") -> tuple[list[_Cell], list[Finding]]:
    """The cells that go into the module, and PTL000 for the cells that do not parse."""
    cells: list[_Cell] = []
    broken: list[Finding] = []
    next_id = 0
    for index, source in nb.code_cells():
        masked = mask(source, next_id)
        if masked is None:
            continue  # %%bash, %%writefile, ...: not Python
        next_id += len(masked.magics) + 1
        text = masked.text
        if text and not text.endswith(("\n", "\r")):
            text += "\n"
        if not _valid_alone(text):
            try:
                parse(text)
            except Exception as exc:  # noqa: BLE001 - any parser failure is a syntax error
                finding = _syntax_error(path, exc, text)
                if isinstance(finding, str):  # only LibCST rejects the cell: leave it out
                    continue
                if settings.is_enabled(finding.code, path):
                    broken.append(replace(finding, cell=index))
                continue
        cells.append(_Cell(index, source, masked, text))
    return cells, broken


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
            lines = _lines(cells[k].text)
            end = Position(max(len(lines), 1), len(_body(lines[-1])) if lines else 0)
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
            new[target] = _add_imports(new[target], missing)
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


_LEADING_PLACEHOLDER = re.compile(r"^pass  (# ptlint-magic:\d+)$")


def _add_imports(text: str, imports: list[str]) -> str:
    """`add_imports` on a cell: magics at the top of the cell stay above the imports
    (as comments for the moment, so that LibCST keeps them in the module header)."""
    lines = _lines(text)
    top = 0
    while top < len(lines) and (_LEADING_PLACEHOLDER.match(_body(lines[top]))
                                or not lines[top].strip()):
        top += 1
    head = [_LEADING_PLACEHOLDER.sub(r"\1", _body(line)) + line[len(_body(line)):]
            for line in lines[:top]]
    out = add_imports("".join(head + lines[top:]), imports)
    out = re.sub(r"^(# ptlint-magic:\d+)$", r"pass  \1", out, flags=re.M)
    return _terminated(out)


def _terminated(text: str) -> str:
    """A cell's text ends with a line break, or the next cell would run into it."""
    return text + "\n" if text and not text.endswith(("\n", "\r")) else text


def _import_cell(texts: list[str], cells: list[_Cell], first_touched: int) -> int | None:
    """Where missing imports go: the first cell with an import, if it comes no later
    than the first cell a fix touches; else the first cell (never a cell IPython
    dedents: its lines cannot move)."""
    for k, text in enumerate(texts[: first_touched + 1]):
        if re.search(r"^(?:import|from)\s", text, re.M) and not cells[k].masked.dedented:
            return k
    return None if not texts or cells[0].masked.dedented else 0


def _fix(cells: list[_Cell], path: str, settings: "Settings", *, unsafe: bool,
         first: LintResult | None = None) -> tuple[list[str], int, LintResult, list[str]]:
    """Apply allowed fixes until nothing changes; the module's texts per cell, the
    number of fixes applied, what remains (module coordinates) and errors. `first`:
    the lint of the cells as they are, when the caller has it."""
    texts = [c.text for c in cells]
    valid = [_compiles(t) for t in texts]
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
        if new is None or not _all_ok(texts, new, valid):
            for fix, edits in pairs:
                single = _apply(texts, cells, [(fix, edits)], edits[0][0])
                if single is None or not _all_ok(texts, single, valid):
                    bad = mapped[id(fix)][0]
                    rejected.add((bad.code, bad.span))
                    k, where = layout.locate(bad.span.start)
                    errors.append(f"{path}:cell {cells[k].index}:{where.line}: fix for {bad.code} "
                                  "would break the cell; not applied")
            continue
        applied += len(chosen)
        texts = new
    layout = Layout(texts)
    result = lint_text(layout.joined, path, settings)
    errors.append(f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes")
    result.errors[:0] = errors
    return texts, applied, result, errors


def _all_ok(before: list[str], after: list[str], valid: list[bool]) -> bool:
    for old, new, was_valid in zip(before, after, valid):
        if old == new:
            continue
        if _placeholders(old) != _placeholders(new):  # a fix must not drop or copy a magic
            return False
        if was_valid and not _compiles(new):
            return False
    return True


def _restore(cell: _Cell, text: str) -> str:
    """The cell's new source: magics put back, the added line break taken off."""
    if text.endswith(("\n", "\r")) and not cell.source.endswith(("\n", "\r")):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    return unmask(text, cell.masked)


def cell_diff(path: str, index: int, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(),
        fromfile=f"a/{path}:cell {index}", tofile=f"b/{path}:cell {index}", lineterm="",
    )
    return "".join(line + "\n" for line in lines)


# -- the entry point the runner calls ------------------------------------------------
def process(path: Path, data: bytes, job: "Job", write: bool = True) -> "Outcome":
    """Lint (or fix, or diff) one notebook."""
    from ptlint.runner import Cache, Outcome

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
    cached = cache.get(key) if cache else None
    if cached is not None and (job.mode == "check" or not any(
        f.fix and settings.fix_allowed(f.code, f.fix.safety, unsafe=job.unsafe) for f in cached
    )):
        out.findings = cached
        return out

    cells, broken = _prepare(nb, name, settings)
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

    if job.mode == "check" or not cells:
        out.findings = in_cells(first.findings)
        out.errors = first.errors
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
        out.errors = result.errors
        if cache and not out.errors:
            cache.put(key, out.findings)
        return out
    try:
        new_text = nb.with_sources(changed)
    except NotebookError as exc:
        out.errors = [*errors, f"{name}: {exc}; not written"]
        return out
    out.fixed = applied
    out.new_text = new_text
    if job.mode == "diff":
        out.diff = "".join(cell_diff(name, i, out.cells[i], changed[i]) for i in sorted(changed))
        out.findings = in_cells(first.findings)
        out.errors = [*errors, *first.errors]
        return out
    out.findings = in_cells(result.findings, texts)
    out.errors = result.errors
    out.cells = {**out.cells, **changed}
    out.text = new_text
    if write:
        from ptlint.runner import write_fixed

        write_fixed(path, Source(new_text, "utf-8", nb.bom), out)
    return out
