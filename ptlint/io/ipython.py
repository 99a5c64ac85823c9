"""IPython syntax in notebook cells (magics, shell escapes, `?` help,
auto-call) masked with placeholder statements of the same line count, so that
the cell parses as Python, and put back untouched afterwards."""
from __future__ import annotations

import codeop
import re
import warnings
from dataclasses import dataclass

from ptlint.io.text import lines_of
from ptlint.model import Position

# Cell magics whose body is Python run in the kernel; any other cell magic
# (%%bash, %%writefile, %%html, ...) makes the cell something else: it is skipped.
PYTHON_CELL_MAGICS = frozenset({
    "time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy",
})

MARKER = "ptlint-magic"  # placeholders are `pass  # ptlint-magic:<id>`
_MAGIC_ASSIGN = re.compile(r"^[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[!%]")
_CELL_MAGIC = re.compile(r"^%%(\w+)")

# -- IPython syntax ---------------------------------------------------------------
def _body(line: str) -> str:
    return line.rstrip("\r\n")


def indent_of(line: str) -> str:
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


# Line magics (and the shell aliases IPython defines) that notebooks call without
# their `%`, as IPython's automagic (on by default) allows: `cd data`, `pip install x`.
_AUTOMAGIC = frozenset({
    "aimport", "autoreload", "bookmark", "cat", "cd", "conda", "config", "cp", "dhist", "env",
    "history", "load_ext", "ls", "matplotlib", "mkdir", "mv", "pip", "popd", "precision",
    "pushd", "pwd", "pylab", "reload_ext", "reset", "rm", "rmdir", "run", "set_env", "store",
    "sx", "system", "time", "timeit", "who", "whos", "xmode"})
_FIRST_NAME = re.compile(r"([A-Za-z_]\w*)(?:[ \t]|$)")


def _is_magic(code: str) -> bool:
    """Whether a logical line (without its indentation) is IPython syntax."""
    if not code:
        return False
    # %magic, %%magic, !shell, !!shell, ?help, and auto-call (/f x, ,f x, ;f x):
    # none of them can start a Python statement.
    if code[0] in "%!?/,;" or _MAGIC_ASSIGN.match(code) is not None:
        return True
    return _automagic(code)


def _automagic(code: str) -> bool:
    """A line magic called without its `%` (`cd data`, `pip install torch`): a line
    that starts with a magic's name and is not Python (`time = 3` is)."""
    first = _FIRST_NAME.match(code)
    if first is None or first.group(1) not in _AUTOMAGIC:
        return False
    try:  # (a statement that goes on in the next lines, `config = {`, is incomplete: Python)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            codeop.compile_command(_body(code), "<cell>", "exec")
    except SyntaxError:
        return True
    except (ValueError, OverflowError, RecursionError, MemoryError):
        return False
    return False


def free_marker(texts: list[str]) -> str:
    """A placeholder marker that no text contains: a line of a cell that only
    looks like a placeholder must stay as it is."""
    marker, n = MARKER, 0
    while any(f"# {marker}:" in text for text in texts):
        n += 1
        marker = f"{MARKER}-{n}"
    return marker


def placeholder(marker: str, magic_id: int) -> str:
    return f"pass  # {marker}:{magic_id}"


@dataclass
class Masked:
    text: str  # the cell's text, IPython syntax replaced by placeholders
    magics: dict[int, tuple[str, str, bool]]  # id -> (original line, indent, first line)
    marker: str = MARKER  # see free_marker
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
_MAYBE_IPYTHON = re.compile(r"^[ \t\f]*[%!?/,;]|\?[ \t\f]*(?:#[^\r\n]*)?\r?$|=\s*[!%]|"
                            rf"^[ \t\f]*(?:{'|'.join(sorted(_AUTOMAGIC))})(?:[ \t]|\r?$)", re.M)


def mask(source: str, next_id: int = 0, marker: str = MARKER) -> Masked | None:
    """The cell's Python, with IPython lines masked; None for a non-Python cell magic.
    `marker` must not occur in the source (free_marker)."""
    blank = source[: len(source) - len(source.lstrip())]
    if not _MAYBE_IPYTHON.search(source) and not re.split(r"\r\n|\r|\n", blank)[-1]:
        return Masked(source, {}, marker)  # nothing to mask, nothing to dedent: most cells
    return _mask(source, next_id, marker)


def _mask(source: str, next_id: int, marker: str = MARKER) -> Masked | None:
    lines = lines_of(source)
    out: list[str] = []
    magics: dict[int, tuple[str, str, bool]] = {}
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    dedent, dedented = "", set()
    if first is not None and lines[first][:1] in (" ", "\t"):
        dedent = indent_of(lines[first])
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
            indent = magics[next_id - 1][1] if magic_continues else indent_of(code)
            magics[next_id] = (code, indent, not magic_continues)
            out.append(indent + placeholder(marker, next_id) + ending)
            next_id += 1
            magic_continues = code.endswith("\\")
            continue
        if scan.at_start:
            trial = _Scan()
            last = trial.feed(line)
            if last == "?" and trial.at_start:  # `obj?`, `obj??`: help
                magics[next_id] = (code, indent_of(code), True)
                out.append(indent_of(code) + placeholder(marker, next_id) + ending)
                next_id += 1
                continue
        scan.feed(line)
        out.append(line)
    return Masked("".join(out), magics, marker, dedent, frozenset(dedented))


def unmask(text: str, masked: Masked) -> str:
    """Put the masked lines back (a placeholder a fix re-indented takes the new
    indent) and the indentation IPython would remove."""
    out = []
    line_re = re.compile(rf"^([ \t]*)pass  # {re.escape(masked.marker)}:(\d+)$")
    for number, line in enumerate(lines_of(text), 1):
        code = _body(line)
        match = line_re.match(code)
        if match and int(match.group(2)) in masked.magics:
            original, indent, first = masked.magics[int(match.group(2))]
            if first and match.group(1) != indent:
                original = match.group(1) + original.lstrip(" \t")
            line = original + line[len(code):]
        out.append(masked.dedent + line if number in masked.dedented else line)
    return "".join(out)


def placeholders(text: str, marker: str = MARKER) -> list[int]:
    return sorted(int(m.group(1)) for m in
                  re.finditer(rf"# {re.escape(marker)}:(\d+)\r?$", text, re.M))
