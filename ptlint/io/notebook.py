"""The `.ipynb` file: its code cells, and writing changed cell sources back so
that every other byte of the file stays as it was."""
from __future__ import annotations

import bisect
import functools
import json
import re
from itertools import accumulate
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

from ptlint.io.ipython import indent_of
from ptlint.io.text import line_starts
from ptlint.model import cell_label

class NotebookError(Exception):
    """The file is not a notebook we can read; the message says why."""

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
                raise NotebookError(f"{cell_label(index)} is not a JSON object")
            if not isinstance(cell.get("cell_type"), str):
                raise NotebookError(f"{cell_label(index)} has no `cell_type`")
            source = cell.get("source")
            if not (isinstance(source, str) or (
                isinstance(source, list) and all(isinstance(s, str) for s in source)
            )):
                raise NotebookError(
                    f"{cell_label(index)}: `source` is neither a string nor a list of strings")
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
        return encode_like(b"\xef\xbb\xbf" if self.bom else b"", text)

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


def encode_like(original: bytes, text: str) -> bytes:
    """A notebook's new text as bytes: UTF-8, with a BOM if `original` had one."""
    data = text.encode("utf-8")
    return b"\xef\xbb\xbf" + data if original.startswith(b"\xef\xbb\xbf") else data


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
        key_indent = indent_of(text[line_start:start])
        item = newline + key_indent + unit
        close = newline + key_indent
    return "[" + item + ("," + item).join(dump(s) for s in value) + close + "]"


@functools.lru_cache(maxsize=8)  # every finding of a notebook asks again
def source_lines(text: str) -> dict[int, list[int]]:
    """Where each cell's source sits in the notebook file: for each cell (index in
    `cells`), the line of the file (1-based) holding each line of its source.

    A source written as a list of strings usually has one line per element, each on
    a line of its own; a source written as one string has all its lines on one line
    of the file. Returns {} for text that is not a notebook."""
    try:
        spans = _source_spans(text)
    except (ValueError, IndexError, AttributeError, RecursionError):
        return {}
    file_starts = line_starts(text)
    decoder = json.JSONDecoder()
    out: dict[int, list[int]] = {}
    for index, (start, end) in spans.items():
        pieces: list[tuple[int, str]] = []  # (offset in the file, decoded text)
        if text[start] == "[":
            i = _WS.match(text, start + 1).end()  # type: ignore[union-attr]
            while text[i] == '"':
                value, after = scanstring(text, i + 1)
                pieces.append((i, value))
                i = _WS.match(text, after).end()  # type: ignore[union-attr]
                if text[i] == ",":
                    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        elif text[start] == '"':
            pieces.append((start, decoder.raw_decode(text, start)[0]))
        if not pieces:
            continue
        joined = "".join(value for _, value in pieces)
        piece_starts = list(accumulate((len(v) for _, v in pieces[:-1]), initial=0))
        lines = []
        for offset in line_starts(joined):
            k = max(bisect.bisect_right(piece_starts, offset) - 1, 0)
            if offset >= len(joined) and lines:
                break  # the empty line after a final line break
            lines.append(bisect.bisect_right(file_starts, pieces[k][0]))
        out[index] = lines
    return out


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
