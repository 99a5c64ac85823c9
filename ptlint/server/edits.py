"""What each code action does to the text: one finding's fix, every fix in the
file, a `# noqa` comment. Each returns the new text of every document it changes
(a file, or the cells of a notebook), checked to parse, or None; `text_edits`
turns a new text into the edits the client applies."""
from __future__ import annotations

import difflib
import io
import re
import tokenize

from lsprotocol import types

from ptlint.engine.guard import fits_oldest_python, python_verdict, valid
from ptlint.engine.suppress import NOQA
from ptlint.io.ipython import mask
from ptlint.io.text import line_starts
from ptlint.server.documents import Lines
from ptlint.server.lint import Item, Linted, path_name


def _compiles(text: str, cell: bool) -> bool:
    if cell:  # IPython syntax is masked as the engine masks it
        masked = mask(text, 0)
        if masked is None:
            return True  # a %%bash cell: not Python, nothing to break
        text = masked.text
    return python_verdict(text, full=True) is None


def _checked(linted: Linted, new: dict[str, str]) -> dict[str, str] | None:
    """`new` if every changed text that compiled still compiles."""
    old = linted.texts()
    cell = linted.snapshot.cells is not None
    changed = {uri: text for uri, text in new.items() if old.get(uri) != text}
    for uri, text in changed.items():
        if _compiles(old[uri], cell) and not _compiles(text, cell):
            return None
    return changed or None


def _by_uri(linted: Linted, sources: dict[int, str]) -> dict[str, str]:
    assert linted.snapshot.cells is not None
    uris = {index: uri for index, uri, _ in linted.snapshot.cells}
    return {uris[index]: text for index, text in sources.items() if index in uris}


def fixable(linted: Linted, item: Item) -> bool:
    fix = item.finding.fix
    return (fix is not None and item.source is not None and linted.settings is not None
            and linted.settings.fix_allowed(item.finding.code, fix.safety, unsafe=True))


def fixed(linted: Linted, item: Item) -> dict[str, str] | None:
    """The texts with this finding's fix applied."""
    from ptlint.engine.fix import apply_fixes

    if not fixable(linted, item):
        return None
    assert item.source is not None and item.source.fix is not None
    if linted.cells is not None:
        sources = linted.cells.with_fix(item.source)
        return None if sources is None else _checked(linted, _by_uri(linted, sources))
    text = linted.snapshot.text
    new = apply_fixes(text, [item.source.fix])
    # the checks `ptlint --fix` makes: LibCST parses it, and what compiled (and fit
    # the oldest Python supported) still does
    compiled = python_verdict(text, full=True) is None
    if new is None or not valid(new, path_name(linted.snapshot), compiles=compiled,
                                oldest=compiled and fits_oldest_python(text)):
        return None
    return _checked(linted, {linted.snapshot.uri: new})


def fixed_all(linted: Linted) -> dict[str, str] | None:
    """The texts with every allowed fix applied (unsafe ones only when
    `unsafe-fixes` is on), as `ptlint --fix` would write them."""
    from ptlint.engine.fix import fix_text

    settings = linted.settings
    if settings is None:
        return None
    unsafe = bool(settings.unsafe_fixes)
    if linted.cells is not None:
        changed = linted.cells.fix_all(unsafe=unsafe)[0]
        return _checked(linted, _by_uri(linted, changed))
    result = fix_text(linted.snapshot.text, path_name(linted.snapshot), settings, unsafe=unsafe)
    return _checked(linted, {linted.snapshot.uri: result.text})


def _in_string(text: str, line: int) -> bool:
    """Whether the end of line `line` (1-based) is inside a string that goes on
    to the next line, where a comment would become part of the string."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.start[0] > line:
                return False
            if tok.type == tokenize.STRING and tok.start[0] <= line < tok.end[0]:
                return True
    except (tokenize.TokenError, SyntaxError, SystemError):  # SystemError: CPython 3.13.0
        return True  # cannot tell: do not risk it
    return False


def with_noqa(line: str, code: str) -> str:
    """`line` with `code` added to its `# noqa: ...` list, or a new `# noqa: code`."""
    for match in NOQA.finditer(line):
        if match.group("codes") is not None:
            end = match.end("codes")
            return f"{line[:end]}, {code}{line[end:]}"
    stripped = line.rstrip()
    return f"{stripped}  # noqa: {code}{line[len(stripped):]}"


def suppressed(linted: Linted, item: Item) -> dict[str, str] | None:
    """The text with `# noqa: CODE` on the finding's first line."""
    if item.finding.code == "PTL000":
        return None  # a syntax error cannot be suppressed
    text = linted.texts()[item.uri]
    number = item.finding.span.start.line
    starts = line_starts(text)
    if number > len(starts):
        return None
    begin = starts[number - 1]
    end = starts[number] if number < len(starts) else len(text)
    body = re.match(r"[^\r\n]*", text[begin:end]).group()  # type: ignore[union-attr]
    masked = mask(text, 0) if linted.snapshot.cells is not None else None
    if _in_string(masked.text if masked is not None else text, number):
        return None
    new = text[:begin] + with_noqa(body, item.finding.code) + text[begin + len(body):]
    return _checked(linted, {item.uri: new})


def text_edits(old: str, new: str, encoding: str) -> list[types.TextEdit]:
    """Edits that turn `old` into `new`, one per run of changed lines."""
    lines = Lines(old, encoding)
    old_lines = _split(old)
    new_lines = _split(new)
    edits = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = lines.starts[i1] if i1 < len(lines.starts) else len(old)
        end = lines.starts[i2] if i2 < len(lines.starts) else len(old)
        edits.append(types.TextEdit(
            range=lines.range(lines.from_offset(start), lines.from_offset(end)),
            new_text="".join(new_lines[j1:j2]),
        ))
    return edits


def _split(text: str) -> list[str]:
    """The lines of `text`, each with its line break."""
    starts = line_starts(text)
    out = [text[a:b] for a, b in zip(starts, starts[1:])]
    last = text[starts[-1]:]
    return out + [last] if last else out
