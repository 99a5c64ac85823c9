"""Before the rules: is this text Python, and can LibCST parse it safely?

CPython's own parser gives the syntax error (PTL000) with its position and
message; a file nested deeper than LibCST's native parser can take is refused
before it is parsed (a segmentation fault otherwise).
"""
from __future__ import annotations

import ast
import bisect
import re
import tokenize
import warnings
from contextlib import contextmanager
from typing import Iterator

import libcst as cst

from ptlint.analysis.walk import descendants
from ptlint.io.text import apply_edits, line_starts, line_text, tokens
from ptlint.model import SYNTAX_ERROR, Edit, Finding, Fix, Position, Safety, Span

OLDEST_PYTHON = (3, 10)  # pyproject.toml's requires-python: what fixed code must run on
_FSTRING = re.compile(r"(?<![\w'\"])[rRbBuU]?[fF][rR]?['\"]")


def has_fstrings(text: str) -> bool:
    return _FSTRING.search(text) is not None


def syntax_finding(path: str, line: int, column: int, detail: str,
                   text: str | None = None) -> Finding:
    """PTL000 at (line, column); given the file's `text`, one at `.cuda(async=True)`
    says what it is, with its fix."""
    code, name = SYNTAX_ERROR
    start = Position(line, column)
    renamed = _async_arguments(text) if text is not None and "async" in text else []
    if start not in renamed:
        return Finding(path, code, name, f"SyntaxError: {detail}", Span(start, start))
    end = Position(line, column + len("async"))
    message = (f"SyntaxError: `async` is a keyword since Python 3.7; torch 0.4 renamed this "
               f"argument `non_blocking`")
    fix = Fix("Rename every `async=` of a tensor's move to `non_blocking=`", Safety.SAFE,
              tuple(Edit(at, Position(at.line, at.column + len("async")), "non_blocking")
                    for at in renamed))
    if python_verdict(apply_edits(text, fix.edits)) is not None:  # another error left
        fix = None
    return Finding(path, code, name, message, Span(start, end), fix)


# The tensor methods whose `async` argument torch 0.4 renamed `non_blocking`.
_ASYNC_METHODS = frozenset({"cuda", "to", "copy_", "type"})


def _async_arguments(text: str) -> list[Position]:
    """Where `async=` is passed to `.cuda(...)`, `.to(...)`, `.copy_(...)` or
    `.type(...)` in `text` (Python's tokenizer reads `async` as a name)."""
    found: list[Position] = []
    callees: list[str | None] = []  # per open bracket: the method it calls, if one of those
    before: list[str] = ["", ""]  # the two tokens before this one
    waiting: Position | None = None  # an `async` that `=` would make an argument
    for tok in tokens(text):
        if tok.type in (tokenize.NL, tokenize.COMMENT):
            continue
        string = tok.string
        if waiting is not None and string == "=" and callees and callees[-1]:
            found.append(waiting)
        waiting = None
        if string in ("(", "[", "{"):
            method = before[-1] if string == "(" and before[-2] == "." else None
            callees.append(method if method in _ASYNC_METHODS else None)
        elif string in (")", "]", "}") and callees:
            callees.pop()
        elif string == "async" and before[-1] in ("(", ","):
            waiting = Position(tok.start[0], tok.start[1])
        before = [before[-1], string]
    return found


def python_verdict(text: str, *, full: bool = False) -> tuple[int, int, str] | None:
    """Where and why CPython rejects `text` ((line, column, message), column 0-based),
    or None if it parses (and, with `full`, compiles). CPython's positions and
    messages are much better than LibCST's ("Missing parentheses in call to 'print'")."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for "\d" and the like
            compile(text, "<ptlint>", "exec", 0 if full else ast.PyCF_ONLY_AST,
                    dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        starts = line_starts(text)
        if "\0" in text and "null bytes" in str(exc):  # no position given (ValueError < 3.12)
            at = text.index("\0")
            line = bisect.bisect_right(starts, at)
            return line, at - starts[line - 1], "source code cannot contain null bytes"
        if not isinstance(exc, SyntaxError):
            return 1, 0, str(exc)
        line = min(max(exc.lineno or 1, 1), len(starts))
        column = min(max((exc.offset or 1) - 1, 0), len(line_text(text, starts, line)))
        return line, column, exc.msg or "invalid syntax"
    except (RecursionError, MemoryError):
        return 1, 0, "too deeply nested for Python to compile"
    return None


def syntax_error(path: str, exc: Exception, text: str, what: str = "file") -> Finding | str:
    """PTL000 where CPython says the file is wrong; when only LibCST rejects it,
    an error line (ptlint's limitation, not the user's syntax error)."""
    verdict = python_verdict(text)
    if verdict is not None:
        return syntax_finding(path, *verdict, text=text)
    line = getattr(exc, "raw_line", None) or getattr(exc, "lineno", None) or 1
    if isinstance(exc, RecursionError):
        detail = "too deeply nested"
    else:
        detail = getattr(exc, "message", None) or str(exc).splitlines()[0] or type(exc).__name__
    return (f"{path}:{line}: LibCST cannot parse this {what}, although Python can ({detail}); "
            f"{what} skipped")


# LibCST's native parser recurses once per level of expression nesting: a few
# thousand levels overflow the C stack (a segmentation fault: LibCST issue #619),
# and long before that its time grows with the cube of the depth (a chain of
# 1000 subscripts takes seconds, of 2000 minutes). The rules' visitors reach
# Python's recursion limit at a few hundred levels anyway. So a file is measured
# before it is parsed; real code stays below 30.
DEPTH_LIMIT = 500
BRACKET_LIMIT = 200  # CPython's own limit on nested brackets
_DEEP_TEXT = ("(", "[", "{", ".", "+", "-", "*", "/", "%", "@", "&", "|", "^", "~",
              "if", "not", "lambda", "await", "yield")
_NOT_CODE = re.compile(  # comments and strings: their brackets do not count
    r"#[^\r\n]*"
    r"|'''(?:\\.|[^\\])*?'''"
    r'|"""(?:\\.|[^\\])*?"""'
    r"|'(?:\\.|[^\\'\r\n])*'"
    r'|"(?:\\.|[^\\"\r\n])*"'
)
# (`i(?<!\wi)f\b` is `\bif\b`: spelled so that every alternative starts with a
# character, which lets the regex engine skip ahead to the next candidate; a
# third faster on real files)
_NESTING = re.compile(r"[()\[\]{},;\n]|\r\n?|\\(?:\r\n?|\n)|[-+*/%@&|^~.]+"
                      r"|i(?<!\wi)f\b|n(?<!\wn)ot\b|l(?<!\wl)ambda\b|a(?<!\wa)wait\b|y(?<!\wy)ield\b")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _only_newlines(match: re.Match) -> str:
    return "".join(_LINE_BREAK.findall(match.group()))


def nesting(text: str) -> tuple[int, int, int]:
    """(depth, line, brackets): an upper bound on the depth of the expression trees
    LibCST would build, the line where it peaks, and the deepest bracket nesting.

    One pass over the operators and brackets outside strings and comments: in
    each bracketed element, a chain of operators (`a.b[c](d) + e`) nests one
    level per operator, and a bracket adds the depth of its deepest element.
    """
    if sum(map(text.count, _DEEP_TEXT)) <= DEPTH_LIMIT:
        return 0, 1, 0  # not enough operators in the whole file: the common case
    code = _NOT_CODE.sub(_only_newlines, text)
    if _paragraphs_shallow(code):
        return 0, 1, 0  # not enough in any statement: the common case of a large file
    stack: list[tuple[int, int, int]] = []
    ops = child = best = 0  # operators in this element, its deepest bracket, best element so far
    worst = where = brackets = 0
    for match in _NESTING.finditer(code):
        token = match.group()
        first = token[0]
        if first in "\r\n":
            if not stack:  # a new statement
                ops = child = best = 0
            continue
        if first == "\\":  # a backslash continuation: the statement goes on
            continue
        if first in "([{":
            stack.append((ops, child, best))
            ops = child = best = 0
            brackets = max(brackets, len(stack))
        elif first in ")]}":
            depth = max(best, ops + child) + 1
            if stack:
                ops, child, best = stack.pop()
                ops += 1
                child = max(child, depth)
        elif first in ",;":
            best = max(best, ops + child)
            ops = child = 0
        else:
            ops += 1 if first.isalpha() else len(token)
        if ops + child > worst:
            worst, where = ops + child, match.start()
    line = len(_LINE_BREAK.findall(code, 0, where)) + 1
    return worst, line, brackets


def _paragraphs_shallow(code: str) -> bool:
    """Whether no statement of `code` (strings and comments blanked) holds more
    operators and brackets than BRACKET_LIMIT, which keeps its depth (at most
    twice that) under DEPTH_LIMIT and its brackets under BRACKET_LIMIT. Counted
    per paragraph (text between blank lines), a paragraph joined to the next
    while a bracket is open or a line ends with a backslash: a few counts of
    `str.count` per paragraph instead of one step per operator."""
    joined = opened = 0  # operators of the statements still open, brackets open
    continued = False  # the last paragraph ended with a backslash
    for paragraph in code.split("\n\n"):
        count = sum(map(paragraph.count, _DEEP_TEXT))
        joined = joined + count if opened or continued else count
        if joined > BRACKET_LIMIT:
            return False
        opened += (paragraph.count("(") + paragraph.count("[") + paragraph.count("{")
                   - paragraph.count(")") - paragraph.count("]") - paragraph.count("}"))
        if opened < 0:  # not Python: leave it to the full count
            return False
        continued = paragraph.rstrip(" \t\r\n").endswith("\\")
    return True


def too_deep(text: str, path: str, what: str = "file") -> Finding | str | None:
    """PTL000 if CPython itself rejects a deeply nested file, an error line if only
    LibCST could not take it, None if the file is safe to parse."""
    if "\0" in text:  # LibCST accepts a null byte in a comment or string; Python never does
        verdict = python_verdict(text)
        if verdict is not None:
            return syntax_finding(path, *verdict)
    depth, line, brackets = nesting(text)
    if depth <= DEPTH_LIMIT and brackets <= BRACKET_LIMIT:
        return None
    verdict = python_verdict(text, full=True)
    if verdict is not None:
        if verdict[:2] == (1, 0) and line != 1:  # CPython gave up without a position
            verdict = (line, 0, verdict[2])
        return syntax_finding(path, *verdict)
    if depth <= DEPTH_LIMIT:
        return None
    try:  # the estimate is an upper bound: measure the real tree before giving up
        real = _ast_depth(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        real = depth
    if real <= DEPTH_LIMIT:
        return None
    return (f"{path}:{line}: expression nested about {real} levels deep; ptlint parses at most "
            f"{DEPTH_LIMIT} levels; {what} skipped")


def _ast_depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse(text: str) -> cst.Module:
    """LibCST's `parse_module`, about a tenth faster: see `unvalidated`."""
    with unvalidated(text):
        return cst.parse_module(text)


_VALIDATE = cst.CSTNode.__post_init__
# The parser's nodes whose check can still reject them: `"a" b"b"`, a bare
# `except:` before another handler, and a name with a character no identifier
# may hold (only possible with non-ASCII text).
_CHECKED = frozenset({cst.ConcatenatedString, cst.Try})


def _check_some(node: cst.CSTNode) -> None:
    if type(node) in _CHECKED:
        node._validate()


def _check_some_non_ascii(node: cst.CSTNode) -> None:
    kind = type(node)
    if kind is cst.Name:
        if not node.value.isascii():
            node._validate()
    elif kind in _CHECKED:
        node._validate()


@contextmanager
def unvalidated(text: str) -> Iterator[None]:
    """Within this, the nodes LibCST's parser builds from `text` skip most of
    the checks each node makes of its own fields when it is made
    (`CSTNode.__post_init__`). They cost about a tenth of a parse (LibCST's own
    comment there says as much) and repeat what the parser has just
    established, except for the kinds in `_CHECKED` and names spelled with
    non-ASCII characters, which are still checked. (Found by parsing the string
    constants of CPython's and LibCST's test suites both ways: 39,502 programs,
    the same verdicts; tests/test_guard.py keeps the cases.) Nodes made outside
    it (by fixes) are checked as usual."""
    cst.CSTNode.__post_init__ = _check_some if text.isascii() else _check_some_non_ascii
    try:
        yield
    finally:
        cst.CSTNode.__post_init__ = _VALIDATE


def round_trips(text: str) -> bool:
    """Whether LibCST gives back `text` byte for byte. It does not for a form feed
    that precedes a statement (the form feed is dropped and the columns after it
    are off by one), so edits made from its positions would be misplaced and its
    code generation would lose bytes."""
    return lost_lines(text) == frozenset()


def lost_lines(text: str) -> frozenset[int] | None:
    """The lines (1-based) that LibCST does not give back byte for byte: empty when
    it reproduces the file, None when it cannot parse it or the loss cannot be
    told line by line. A form feed before a statement is dropped: positions on
    that line are off, and code printed from its nodes loses the form feed; the
    other lines are reproduced exactly."""
    try:
        code = parse(text).code
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if text.endswith("\r") and not code.endswith("\r"):
        code += "\r"  # LibCST drops a final lone \r (classic Mac line endings)
    if code == text:
        return frozenset()
    old, new = _LINE_BREAK.split(text), _LINE_BREAK.split(code)
    if len(old) != len(new) or _LINE_BREAK.findall(text) != _LINE_BREAK.findall(code):
        return None
    return frozenset(number for number, (a, b) in enumerate(zip(old, new), 1) if a != b)


def valid(text: str, path: str, *, compiles: bool = True, oldest: bool = False) -> bool:
    """Whether LibCST parses `text`, (when the original compiled) CPython compiles
    it and (when the original did) it fits the oldest Python ptlint supports."""
    try:
        module = parse(text)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if compiles and python_verdict(text, full=True) is not None:
        return False
    return not oldest or fits_oldest_python(text, module)


def _fstrings_before_312(module: cst.Module) -> bool:
    """Whether every f-string keeps to the rules of Python < 3.12 (before PEP 701):
    a replacement field holds no backslash, no comment and not the f-string's own
    quote, and no line break in a single-quoted f-string."""
    for node in descendants(module):
        if type(node) is not cst.FormattedString:
            continue
        quote = node.end
        parts = list(node.parts)
        while parts:
            part = parts.pop()
            if type(part) is not cst.FormattedStringExpression:
                continue
            code = "".join(module.code_for_node(n) for n in (
                part.whitespace_before_expression, part.expression,
                part.whitespace_after_expression))
            if "\\" in code or "#" in code or quote in code or (
                    len(quote) == 1 and ("\n" in code or "\r" in code)):
                return False
            parts.extend(part.format_spec or ())
    return True


def fits_oldest_python(text: str, module: cst.Module | None = None) -> bool:
    """Whether `text` is valid for the grammar of Python 3.10 too, as far as CPython's
    `feature_version` and the f-string rules before 3.12 tell (LibCST's parser ignores
    its `python_version` setting)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text, feature_version=OLDEST_PYTHON)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not has_fstrings(text):
        return True
    if module is None:
        try:
            module = parse(text)
        except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return _fstrings_before_312(module)

