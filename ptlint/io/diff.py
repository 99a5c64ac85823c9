"""Unified diffs of fixed text, as `patch` and `git apply` read them."""
from __future__ import annotations

import difflib
import re

from ptlint.io.text import lines_of
from ptlint.model import cell_label

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
              "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_NO_EOL = "\n\\ No newline at end of file\n"


def _diff_lines(text: str) -> list[str]:
    """Lines as Python and `patch` see them: str.splitlines() would also break at
    form feeds and other Unicode separators, and the diff would not apply."""
    lines = lines_of(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += _NO_EOL
    return lines


def _name(name: str) -> str:
    """A file name in a diff header; one with control characters is quoted the way
    git quotes it (`"a/red\\033[31m.py"`, which git apply and GNU patch read), so
    that no escape sequence reaches the terminal."""
    if not _CONTROLS.search(name):
        return name
    return '"' + "".join(
        _C_ESCAPES.get(c) or ("".join(f"\\{b:03o}" for b in c.encode()) if _CONTROLS.match(c) else c)
        for c in name) + '"'


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        _diff_lines(before), _diff_lines(after), fromfile=_name(f"a/{path}"),
        tofile=_name(f"b/{path}"),
    ))


def cell_diff(path: str, index: int, before: str, after: str) -> str:
    """The diff of one notebook cell (`index` in the notebook's `cells`)."""
    cell = cell_label(index)
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(),
        fromfile=_name(f"a/{path}:{cell}"), tofile=_name(f"b/{path}:{cell}"), lineterm="",
    )
    return "".join(line + "\n" for line in lines)
