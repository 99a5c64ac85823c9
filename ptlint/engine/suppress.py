"""Suppression comments, read from the file's comment tokens: a `# noqa` inside a
string or a docstring is text, not a directive.

- `# noqa` on a line suppresses every finding that starts on it; a line inside a
  multi-line string, or continued with a backslash, takes the directive of the
  line that ends it (as ruff does);
- `# noqa: PTL101, data-parallel` suppresses those codes or rule names; a
  directive whose list starts with anything else is invalid: it is reported as a
  warning and suppresses nothing;
- `# ptlint: noqa[: CODES]` in a comment of its own line skips the whole file
  (or those codes).

Rules never see them: findings are filtered here. `Directives.unused` reports the
codes that suppressed nothing (`unused-noqa`), and `noqa_edits` writes
directives for findings (`--add-noqa`).
"""
from __future__ import annotations

import bisect
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable

from ptlint._catalog import RULES as CATALOG
from ptlint.io.text import line_starts, line_text, tokens
from ptlint.model import Edit, Finding, Fix, Position, Safety, Span

UNUSED_NOQA = next(code for code, (name, _) in CATALOG.items() if name == "unused-noqa")
_BY_NAME = {name: code for code, (name, _) in CATALOG.items()}
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_NOQA = re.compile(r"#\s*noqa(?![\w-])", re.I)
_LIST = re.compile(r"\s*:")
_ITEM = re.compile(r"[\s,]*([\w-]+)")
_FILE = re.compile(r"#\s*ptlint\s*:\s*noqa(?![\w-])", re.I)
_CANDIDATE = re.compile(r"#\s*(?:ptlint\s*:\s*)?noqa", re.I)
# A directive as text, for editing a single line (the language server's "suppress"
# action); the linter itself reads directives from comment tokens (`Directives`).
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)
INVALID = ("invalid `# noqa` directive: expected codes or rule names (e.g. "
           "`# noqa: PTL101, data-parallel`); it suppresses nothing")


@dataclass
class Directive:
    """One `# noqa` in a comment: where it is, and what it names."""

    line: int
    start: int  # column of its `#`
    end: int  # column after its last code (after `noqa` for a blanket one)
    codes: list[tuple[str, str, int, int]] | None  # (code, as written, start, end); None: all
    used: set[str] = field(default_factory=set)  # the codes it suppressed


@dataclass
class Notice:
    """A warning about the input that is not a finding (an invalid directive)."""

    path: str
    span: Span
    message: str
    cell: int | None = None  # notebooks, as in `Finding`


def _code_of(word: str) -> str | None:
    """The code a directive's word names: a code (any tool's) or a ptlint rule name."""
    if word in _BY_NAME:
        return _BY_NAME[word]
    if _CODE.fullmatch(word):
        return word.upper()
    return None


def _code_list(comment: str, after: int) -> list[tuple[str, str, int, int]] | None | bool:
    """What follows `noqa` at `after`: None (no colon: every code), the codes
    listed after the colon, or False when the list does not start with a code."""
    colon = _LIST.match(comment, after)
    if colon is None:  # `# noqa`, or `# noqa F401` (a blanket directive for ruff too)
        return None
    codes: list[tuple[str, str, int, int]] = []
    pos = colon.end()
    while True:
        item = _ITEM.match(comment, pos)
        code = _code_of(item.group(1)) if item else None
        if item is None or code is None:
            return codes or False
        codes.append((code, item.group(1), item.start(1), item.end(1)))
        pos = item.end()


@dataclass
class Directives:
    """The suppression comments of one module's text."""

    lines: dict[int, list[Directive]] = field(default_factory=dict)
    file: str | set[str] | None = None  # "ALL", the codes the file skips, or None
    invalid: list[Position] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # lines a logical or physical line ends on

    @classmethod
    def read(cls, text: str, *, rows: bool = False) -> "Directives":
        """The directives of `text`; `rows`: also where each line's directive goes
        (needed to add one, or to match a finding in a multi-line string)."""
        out = cls()
        if not rows and _CANDIDATE.search(text) is None:
            return out  # most files: no tokenizing
        last_line = 0  # where the last token that is not a comment ended
        for tok in tokens(text):
            kind, line = tok.type, tok.start[0]
            if kind in (tokenize.NEWLINE, tokenize.NL):
                out.ends.append(line)
            if kind != tokenize.COMMENT:
                if kind not in (tokenize.INDENT, tokenize.DEDENT):
                    last_line = tok.end[0]
                continue
            if "noqa" in tok.string.lower():
                out._comment(tok.string, line, tok.start[1], own_line=last_line != line)
        return out

    def _comment(self, comment: str, line: int, column: int, *, own_line: bool) -> None:
        file = _FILE.match(comment) if own_line else None
        if file is not None:
            codes = _code_list(comment, file.end())
            if codes is False:
                self.invalid.append(Position(line, column))
            elif codes is None:
                self.file = "ALL"
            elif self.file != "ALL":
                self.file = (self.file or set()) | {c for c, _, _, _ in codes}
            return
        for match in _NOQA.finditer(comment):
            codes = _code_list(comment, match.end())
            if codes is False:
                self.invalid.append(Position(line, column + match.start()))
                continue
            if codes is None:
                end = match.end()
            else:
                end = codes[-1][3]
                codes = [(c, w, column + s, column + e) for c, w, s, e in codes]
            self.lines.setdefault(line, []).append(
                Directive(line, column + match.start(), column + end, codes))

    def row(self, line: int) -> int:
        """The line whose directive applies to `line`: itself, or for a line inside
        a multi-line string or continued by a backslash, the line that ends it."""
        k = bisect.bisect_left(self.ends, line)
        return self.ends[k] if k < len(self.ends) else line

    def suppresses(self, finding: Finding) -> bool:
        """Whether a directive on the finding's line covers it (and note that it did)."""
        directives = self.lines.get(finding.span.start.line)
        if directives is None and self.ends:
            directives = self.lines.get(self.row(finding.span.start.line))
        for directive in directives or ():
            if directive.codes is None:
                return True
            if any(code == finding.code for code, _, _, _ in directive.codes):
                directive.used.add(finding.code)
                return True
        return False

    def notices(self, path: str) -> list[Notice]:
        return [Notice(path, Span(at, at), INVALID) for at in self.invalid]

    # -- unused-noqa ---------------------------------------------------------------
    def unused(self, text: str, path: str, ran: set[str]) -> list[Finding]:
        """A finding for each directive naming ptlint codes that suppressed nothing.
        `ran`: the codes of the rules that ran on the file. Other tools' codes and
        blanket directives are left alone: they may serve another linter."""
        name = CATALOG[UNUSED_NOQA][0]
        out = []
        for directives in self.lines.values():
            for d in directives:
                if d.codes is None:
                    continue
                kinds: dict[str, list[str]] = {}
                for code, written, _, _ in d.codes:
                    if code in d.used or not _ours(code, written):
                        continue
                    kind = ("unused" if code in ran else "non-enabled" if code in CATALOG
                            else "unknown")
                    kinds.setdefault(kind, []).append(f"`{written}`")
                if not kinds:
                    continue
                detail = "; ".join(f"{k}: {', '.join(v)}" for k, v in kinds.items())
                span = Span(Position(d.line, d.start), Position(d.line, d.end))
                fix = Fix("Remove the unused codes", Safety.SAFE, (_removal(text, d),))
                out.append(Finding(path, UNUSED_NOQA, name,
                                   f"Unused `noqa` directive ({detail})", span, fix))
        return out


def _ours(code: str, written: str) -> bool:
    return written in _BY_NAME or code.startswith("PTL")


def _removal(text: str, d: Directive) -> Edit:
    """The edit that removes a directive's unused ptlint codes, or the directive
    when none is left, keeping every other comment text."""
    assert d.codes is not None
    kept = [w for c, w, _, _ in d.codes if c in d.used or not _ours(c, w)]
    first, last = d.codes[0][2], d.codes[-1][3]
    if kept:
        return Edit(Position(d.line, first), Position(d.line, last), ", ".join(kept))
    starts = line_starts(text)
    line = line_text(text, starts, d.line)
    after = line[d.end:]
    rest = after.lstrip()
    if rest and not rest.startswith("#"):  # a reason: kept as a plain comment
        return Edit(Position(d.line, d.start), Position(d.line, d.end), "#")
    if rest:  # another comment follows
        return Edit(Position(d.line, d.start), Position(d.line, d.end + len(after) - len(rest)), "")
    before = line[:d.start]
    if not before.strip():  # the directive is the whole line: remove the line
        end = Position(d.line + 1, 0) if d.line < len(starts) else Position(d.line, len(line))
        return Edit(Position(d.line, 0), end, "")
    return Edit(Position(d.line, len(before.rstrip())), Position(d.line, len(line)), "")


# -- --add-noqa ---------------------------------------------------------------------
def noqa_edits(text: str, findings: Iterable[Finding]) -> list[Edit]:
    """One edit per line that needs it: a `# noqa: CODES` for the findings that
    start there, added to the line's directive or after its code and comments."""
    directives = Directives.read(text, rows=True)
    wanted: dict[int, set[str]] = {}
    for f in findings:
        if f.code not in ("PTL000", UNUSED_NOQA):
            wanted.setdefault(directives.row(f.span.start.line), set()).add(f.code)
    starts = line_starts(text)
    edits = []
    for row, codes in sorted(wanted.items()):
        listed = [d for d in directives.lines.get(row, []) if d.codes is not None]
        if listed:
            last = listed[-1]
            new = sorted(codes - {c for c, _, _, _ in last.codes or ()})
            at = Position(row, last.end)
            if new:
                edits.append(Edit(at, at, "".join(f", {c}" for c in new)))
            continue
        line = line_text(text, starts, row)
        end = len(line.rstrip())
        edits.append(Edit(Position(row, end), Position(row, len(line)),
                          f"  # noqa: {', '.join(sorted(codes))}"))
    return edits
