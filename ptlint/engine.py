"""Parse once, run every enabled rule in one traversal, build findings in one place."""
from __future__ import annotations

import ast
import bisect
import dataclasses
import re
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import TYPE_CHECKING, Iterable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from ptlint.model import SYNTAX_ERROR, Edit, Finding, Fix, Position, Span
from ptlint.names import NameResolver, ScopeExit
from ptlint.rule import Context, Report, Rule, rule_failed
from ptlint.textio import line_starts, line_text, one_line
from ptlint.walk import child_fields, descendants, walk

if TYPE_CHECKING:
    from ptlint.config import Settings

MAX_FIX_PASSES = 10

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^[ \t\f]*#\s*ptlint:\s*noqa\b(?::\s*(?P<codes>[A-Z0-9,\s]+))?", re.I | re.M)


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors, one line each


@dataclass
class FixResult:
    text: str
    applied: int
    result: LintResult  # findings that remain after fixing


def _syntax_finding(path: str, line: int, column: int, detail: str) -> Finding:
    code, name = SYNTAX_ERROR
    start = Position(line, column)
    return Finding(path, code, name, f"SyntaxError: {detail}", Span(start, start))


def _python_verdict(text: str, *, full: bool = False) -> tuple[int, int, str] | None:
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


def _syntax_error(path: str, exc: Exception, text: str) -> Finding | str:
    """PTL000 where CPython says the file is wrong; when only LibCST rejects it,
    an error line (ptlint's limitation, not the user's syntax error)."""
    verdict = _python_verdict(text)
    if verdict is not None:
        return _syntax_finding(path, *verdict)
    line = getattr(exc, "raw_line", None) or getattr(exc, "lineno", None) or 1
    if isinstance(exc, RecursionError):
        detail = "too deeply nested"
    else:
        detail = getattr(exc, "message", None) or str(exc).splitlines()[0] or type(exc).__name__
    return f"{path}:{line}: LibCST cannot parse this file, although Python can ({detail}); file skipped"


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
_NESTING = re.compile(r"[()\[\]{},;\n]|\r\n?|\\(?:\r\n?|\n)|[-+*/%@&|^~.]+|\b(?:if|not|lambda|await|yield)\b")


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


def _too_deep(text: str, path: str) -> Finding | str | None:
    """PTL000 if CPython itself rejects a deeply nested file, an error line if only
    LibCST could not take it, None if the file is safe to parse."""
    if "\0" in text:  # LibCST accepts a null byte in a comment or string; Python never does
        verdict = _python_verdict(text)
        if verdict is not None:
            return _syntax_finding(path, *verdict)
    depth, line, brackets = nesting(text)
    if depth <= DEPTH_LIMIT and brackets <= BRACKET_LIMIT:
        return None
    verdict = _python_verdict(text, full=True)
    if verdict is not None:
        if verdict[:2] == (1, 0) and line != 1:  # CPython gave up without a position
            verdict = (line, 0, verdict[2])
        return _syntax_finding(path, *verdict)
    if depth <= DEPTH_LIMIT:
        return None
    try:  # the estimate is an upper bound: measure the real tree before giving up
        real = _ast_depth(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        real = depth
    if real <= DEPTH_LIMIT:
        return None
    return (f"{path}:{line}: expression nested about {real} levels deep; ptlint parses at most "
            f"{DEPTH_LIMIT} levels; file skipped")


def _ast_depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse(text: str) -> cst.Module:
    return cst.parse_module(text)


def active_rules(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The rules whose `requires_text` the file satisfies: the rest need no parse."""
    present: dict[str, bool] = {}  # rules share their texts: each is looked for once

    def has(needle: str) -> bool:
        found = present.get(needle)
        if found is None:
            found = present[needle] = needle in text
        return found

    return [r for r in rules if not r.requires_text or any(map(has, r.requires_text))]


def lint_text(
    text: str,
    path: str,
    settings: "Settings",
    *,
    timings: dict[str, float] | None = None,
) -> LintResult:
    """Lint one module's text. Never raises for bad input."""
    result = LintResult()
    file_noqa = _file_noqa(text)
    if file_noqa == "ALL":
        return result
    rules = active_rules(text, settings.rules_for(path))
    if file_noqa:
        rules = [r for r in rules if r.code not in file_noqa]
    clock = time.perf_counter
    t0 = clock()
    if not rules:
        # No rule needs this file: CPython's own parser (several times cheaper
        # than LibCST's) is enough to report a syntax error.
        if settings.is_enabled("PTL000", path):
            verdict = _python_verdict(text)
            if verdict is not None:
                result.findings.append(_syntax_finding(path, *verdict))
        if timings is not None:
            timings["syntax check only"] = timings.get("syntax check only", 0.0) + clock() - t0
        return result
    problem = _too_deep(text, path)
    if problem is None:
        try:
            module = parse(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError, SyntaxError) as exc:
            problem = _syntax_error(path, exc, text)
    if problem is not None:
        if isinstance(problem, str):
            result.errors.append(problem)
        elif settings.is_enabled(problem.code, path):
            result.findings.append(problem)
        return result
    if timings is not None:
        timings["parse"] = timings.get("parse", 0.0) + clock() - t0

    names = NameResolver()
    context = Context(path=path, source=text, names=names, torch_version=settings.torch_version,
                      timings=timings)
    instances = []
    for rule in rules:
        try:
            instances.append(rule(context))
        except Exception as exc:  # noqa: BLE001 - one rule's bug must not hide the others
            result.errors.append(f"{path}: internal error in {rule.code}: {one_line(exc)}")
    t0 = clock()
    try:
        walk(module, [names, *instances, ScopeExit(names)], on_error=rule_failed)
    except RecursionError:
        result.errors.append(f"{path}: too deeply nested for the rules; file skipped")
        return result
    if timings is not None:
        timings["rules"] = timings.get("rules", 0.0) + clock() - t0
    for rule in instances:
        if rule.failed is not None:
            failed = rule.failed
            result.errors.append(f"{path}: internal error in {failed.code}: {one_line(failed.original)}")
    reports = [r for r in context.reports if r.rule.failed is None]
    if reports:
        t0 = clock()
        findings = _build_findings(module, text, reports, path, settings, result.errors)
        starts = line_starts(text)
        result.findings = [f for f in findings if not _noqa(f, text, starts)]
        if "\f" in text and any(f.fix for f in result.findings) and not _round_trips(text):
            # Columns after a form feed that LibCST dropped are off: no edit can be placed.
            result.findings = [replace(f, fix=None) for f in result.findings]
        if timings is not None:
            timings["findings"] = timings.get("findings", 0.0) + clock() - t0
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _file_noqa(text: str) -> str | set[str] | None:
    match = _FILE_NOQA.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return "ALL"
    return {c.upper() for c in re.split(r"[,\s]+", codes) if c}


def _noqa(finding: Finding, text: str, starts: Sequence[int]) -> bool:
    line = line_text(text, starts, finding.span.start.line)
    if "noqa" not in line.lower():
        return False
    for match in _NOQA.finditer(line):
        codes = match.group("codes")
        if codes is None:
            return True
        if finding.code in {c.upper() for c in re.split(r"[,\s]+", codes)}:
            return True
    return False


class _Locator(CodegenState):
    """Where chosen nodes start and end, found in one code generation pass.

    LibCST's PositionProvider and WhitespaceInclusivePositionProvider track
    line and column token by token and keep a range for every node: ten times
    the cost of printing the module, each. This state only notes how many
    tokens were printed when a wanted node starts and ends, and turns those
    counts into lines and columns at the end. `syntactic` nodes get
    PositionProvider's range (whitespace excluded where LibCST records a
    syntactic position, else the inclusive one), `inclusive` nodes get
    WhitespaceInclusivePositionProvider's and the indentation of their block.

    Only the top-level statements that hold a wanted node are printed, when
    `source` is the module's text: each one's text is found in `source` after
    the one before, at the start of a line, and must not occur again before
    the next one; the text skipped in between becomes one token. Otherwise
    (an ambiguous text, or LibCST does not reproduce the file) the whole
    module is printed.
    """

    def __init__(self, module: cst.Module, syntactic: Iterable[cst.CSTNode],
                 inclusive: Iterable[cst.CSTNode], source: str | None = None) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline)
        self.wanted = {id(n) for n in syntactic}
        self.wanted_inclusive = {id(n) for n in inclusive} | self.wanted
        self.indents: dict[int, tuple[str, ...]] = {}  # block indentation of inclusive nodes
        self.opened: dict[int, int] = {}
        self.inclusive: dict[int, tuple[int, int]] = {}
        self.syntactic: dict[int, tuple[int, int]] = {}
        self.partial = source is not None and self._print_statements(module, source)
        if not self.partial:
            self._reset()
            module._codegen(self)
            source = "".join(self.tokens)
        ends = [0, *accumulate(map(len, self.tokens))]
        starts = line_starts(source)

        def position(index: int) -> Position:
            offset = ends[index]
            line = bisect.bisect_right(starts, offset)
            return Position(line, offset - starts[line - 1])

        self._position = position

    def _reset(self) -> None:
        self.tokens = []
        self.indent_tokens = []
        self.indents = {}
        self.opened = {}
        self.inclusive = {}
        self.syntactic = {}

    def _print_statements(self, module: cst.Module, source: str) -> bool:
        """Print the top-level statements that hold wanted nodes, each after a
        token for the text before it; False if that cannot be done."""
        self._reset()
        remaining = set(self.wanted_inclusive)
        holders = []
        for statement in module.body:
            found = {id(n) for n in descendants(statement)} & remaining
            if found:
                holders.append(statement)
                remaining -= found
                if not remaining:
                    break
        if remaining:  # in the header, or in a part of the tree `descendants` skips
            return False
        placed = []  # (index of its gap token, where it starts in `source`, its text)
        done = 0  # where the statements placed so far end in `source`
        for statement in holders:
            first = len(self.tokens)
            self.tokens.append("")  # the text before this statement, filled in below
            statement._codegen(self)
            text = "".join(self.tokens[first + 1:])
            at = source.find(text, done)
            if at < 0 or (at and source[at - 1] not in "\r\n"):
                return False
            placed.append((first, at, text))
            done = at + len(text)
        # A statement placed too early (its text also occurs inside an earlier
        # statement) occurs again before the next placed statement, or before the
        # end for the last one: these regions do not overlap, so this is linear.
        for (_, at, text), after in zip(placed, [*(p[1] for p in placed[1:]), len(source)]):
            if source.find(text, at + 1, after) >= 0:
                return False
        done = 0
        for first, at, text in placed:
            self.tokens[first] = source[done:at]
            done = at + len(text)
        return True

    def pop_trailing_newline(self) -> None:
        pass  # the counts must cover every token; the printed text is not used

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted_inclusive:
            self.opened.setdefault(id(node), len(self.tokens))
            self.indents.setdefault(id(node), tuple(self.indent_tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted_inclusive:
            self.inclusive.setdefault(key, (self.opened[key], len(self.tokens)))

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None):
        key = id(node)
        if key not in self.wanted:
            yield
            return
        for child in (start_node, end_node):  # printed inside: their ranges are needed too
            if child is not None:
                self.wanted.add(id(child))
                self.wanted_inclusive.add(id(child))
        start = len(self.tokens)
        yield
        end = len(self.tokens)
        if start_node is not None:
            start = self._range(start_node)[0]
        if end_node is not None:
            end = self._range(end_node)[1]
        self.syntactic[key] = (start, end)

    def _range(self, node: cst.CSTNode) -> tuple[int, int]:
        found = self.syntactic.get(id(node)) or self.inclusive.get(id(node))
        if found is None:
            raise KeyError(node)
        return found

    def span(self, node: cst.CSTNode) -> Span:
        """PositionProvider's range of a `syntactic` node."""
        start, end = self._range(node)
        return Span(self._position(start), self._position(end))

    def inclusive_span(self, node: cst.CSTNode) -> Span:
        """WhitespaceInclusivePositionProvider's range of an `inclusive` node."""
        found = self.inclusive.get(id(node))
        if found is None:
            raise KeyError(node)
        return Span(self._position(found[0]), self._position(found[1]))


def _build_findings(
    module: cst.Module,
    source: str,
    reports: list[Report],
    path: str,
    settings: "Settings",
    errors: list[str] | None = None,
) -> list[Finding]:
    """Turn reports into findings. Positions are computed only here, for files
    that have something to report. A report that cannot be turned into a finding
    (say, a rule reported a node that is not in the tree) is an internal error
    of its rule, and the other reports still count."""
    reports = [r for r in reports if settings.is_enabled(r.rule.code, path)]
    if not reports:
        return []
    plans = {id(r): [_narrow(old, new) for old, new in r.edits] for r in reports}
    anchors = [node for edits in plans.values() for plan in edits if plan for node in plan[:2]]
    olds = [old for r in reports for old, _ in r.edits]
    locator = _Locator(module, (r.node for r in reports), [*olds, *anchors], source)
    indents = locator.indents
    findings = []
    for report in reports:
        code = report.rule.code
        try:
            where = locator.span(report.node)
            fix = None
            if report.edits:
                edits = []
                for (old, new), plan in zip(report.edits, plans[id(report)]):
                    if plan is not None:  # only the statements that change in a block
                        first, last, added, how = plan
                        start, end = (locator.inclusive_span(first).start,
                                      locator.inclusive_span(last).end)
                        if how == "before":
                            end = start
                        elif how == "after":
                            start = end
                        content = "".join(_printed(module, s, indents[id(first)]) for s in added)
                        edits.append(Edit(start, end, content))
                        continue
                    span = locator.inclusive_span(old)
                    content = "" if new is None else _edit_content(module, old, new, span, indents)
                    edits.append(Edit(span.start, span.end, content))
                fix = Fix(
                    title=report.fix_title or "Apply the fix",
                    safety=settings.safety_for(code, report.safety),
                    edits=tuple(sorted(edits)),
                    imports=report.imports,
                )
        except Exception as exc:  # noqa: BLE001 - one bad report must not hide the others
            if errors is not None:
                why = ("it reported a node that is not in this file's tree"
                       if isinstance(exc, KeyError) and isinstance(exc.args[0], cst.CSTNode)
                       else one_line(exc))
                errors.append(f"{path}: internal error in {code}: {why}")
            continue
        findings.append(
            Finding(
                path=path,
                code=code,
                name=report.rule.name,
                message=report.message,
                span=where,
                fix=fix,
                url=report.rule.url(),
            )
        )
    return findings


_BLOCKS = (cst.Module, cst.IndentedBlock)


def _narrow(old: cst.CSTNode, new: cst.CSTNode | None):
    """An edit that replaces a whole block (the module, an indented block) by a
    copy with a few statements changed, narrowed to those statements:
    (first, last, new statements, how), where `how` is "replace" (from the
    start of `first` to the end of `last`), "before" (insert at the start of
    `first`) or "after" (insert at the end of `last`). None for any other edit.

    Rules move and insert statements by rebuilding their block; printing the
    whole block for each fix would cost as much as the module for a fix at
    the top level, and two fixes in one block would always overlap."""
    if new is None or type(old) is not type(new) or type(old) not in _BLOCKS:
        return None
    for f in dataclasses.fields(old):
        if f.name != "body" and getattr(old, f.name) is not getattr(new, f.name) and (
                getattr(old, f.name) != getattr(new, f.name)):
            return None
    a, b = old.body, new.body
    same = 0
    while same < len(a) and same < len(b) and a[same] is b[same]:
        same += 1
    tail = 0
    while tail < len(a) - same and tail < len(b) - same and a[-1 - tail] is b[-1 - tail]:
        tail += 1
    removed, added = a[same:len(a) - tail], tuple(b[same:len(b) - tail])
    if not removed and not added:
        return None
    if isinstance(old, cst.Module) and not old.has_trailing_newline and not tail:
        return None  # LibCST drops the module's last line break: print it whole
    if removed:
        return removed[0], removed[-1], added, "replace"
    if tail:
        return a[len(a) - tail], a[len(a) - tail], added, "before"
    if same:
        return a[same - 1], a[same - 1], added, "after"
    return None


def _printed(module: cst.Module, node: cst.CSTNode, indent: tuple[str, ...]) -> str:
    """`node` printed at a block indentation."""
    state = CodegenState(default_indent=module.default_indent,
                         default_newline=module.default_newline, indent_tokens=list(indent))
    node._codegen(state)
    return "".join(state.tokens)


def block_indents(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[str, ...]]:
    """The indentation of the block each of `nodes` sits in (by `id`), found in
    one walk of the module."""
    wanted = {id(n) for n in nodes}
    found: dict[int, tuple[str, ...]] = {}
    tokens: list[str] = []
    stack: list[tuple[cst.CSTNode, bool]] = [(module, False)]
    node_type = cst.CSTNode
    while stack and len(found) < len(wanted):
        node, leaving = stack.pop()
        if leaving:
            tokens.pop()
            continue
        if id(node) in wanted:
            found[id(node)] = tuple(tokens)
        if isinstance(node, cst.IndentedBlock):
            tokens.append(module.default_indent if node.indent is None else node.indent)
            stack.append((node, True))
        children: list[cst.CSTNode] = []
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, node_type):
                children.append(value)
            elif isinstance(value, (list, tuple)):
                children.extend(v for v in value if isinstance(v, node_type))
        stack.extend((child, False) for child in reversed(children))
    return found


def _edit_content(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode, span: object,
                  indents: dict[int, tuple[str, ...]] | None = None) -> str:
    """The text of `new` in place of `old`. A node printed on its own loses the
    indentation of its block on continuation lines (`ParenthesizedWhitespace`
    with `indent=True`) and in nested blocks, so a replacement that spans lines
    is printed with the indentation of the block `old` sits in."""
    content = module.code_for_node(new)
    if "\n" not in content and "\r" not in content:
        return content
    if indents is None or id(old) not in indents:
        indents = block_indents(module, [old])
    return _printed(module, new, indents.get(id(old), ()))


# -- fixing -----------------------------------------------------------------
def offsets(text: str):
    """A function from a position in `text` to its index."""
    starts = line_starts(text)

    def offset(pos: Position) -> int:
        if pos.line > len(starts):  # the end of a file without a final line break
            return len(text)
        return starts[pos.line - 1] + pos.column

    return offset


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    offset = offsets(text)

    out, last = [], 0
    for edit in sorted(edits):
        begin, end = offset(edit.start), offset(edit.end)
        out.append(text[last:begin])
        out.append(edit.content)
        last = end
    out.append(text[last:])
    return "".join(out)


def _overlap(a: tuple[Position, Position], b: tuple[Position, Position]) -> bool:
    return a[0] < b[1] and b[0] < a[1] or a[0] == b[0]


def non_overlapping(fixes: Iterable[Fix]) -> list[Fix]:
    """Fixes whose edits touch no edit of a fix already taken (first come, first
    kept). A fix whose own edits overlap each other is never taken."""
    taken: list[Fix] = []
    ranges: list[tuple[Position, Position]] = []
    for fix in sorted(fixes, key=lambda f: f.edits[0].start):
        own = [(e.start, e.end) for e in fix.edits]
        if any(_overlap(a, b) for i, a in enumerate(own) for b in own[i + 1:]):
            continue
        if any(_overlap(a, b) for a in own for b in ranges):
            continue
        taken.append(fix)
        ranges.extend((e.start, e.end) for e in fix.edits)
    return taken


def add_imports(text: str, imports: Iterable[str]) -> str:
    """Add `import x` / `from x import y` statements the fixes need, once each."""
    wanted = sorted(set(imports))
    if not wanted:
        return text
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    for statement in wanted:
        parts = statement.split()
        if parts[0] == "import":
            AddImportsVisitor.add_needed_import(context, parts[1])
        else:  # from a.b import c
            AddImportsVisitor.add_needed_import(context, parts[1], parts[3])
    code = AddImportsVisitor(context).transform_module(parse(text)).code
    if text.endswith("\r") and not code.endswith("\r"):
        code += "\r"  # LibCST drops a final lone \r (classic Mac line endings)
    return code


def _round_trips(text: str) -> bool:
    """Whether LibCST gives back `text` byte for byte. It does not for a form feed
    that precedes a statement (the form feed is dropped and the columns after it
    are off by one), so edits made from its positions would be misplaced and its
    code generation would lose bytes."""
    try:
        code = parse(text).code
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return code == text or (text.endswith("\r") and code == text[:-1])


def _valid(text: str, path: str, *, compiles: bool = True) -> bool:
    """Whether LibCST parses `text` and (when the original compiled) CPython compiles it."""
    try:
        parse(text)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return not compiles or _python_verdict(text, full=True) is None


def _apply(text: str, fixes: Sequence[Fix]) -> str | None:
    """`text` with the fixes' edits and imports, or None when the imports cannot
    be added because the edited text does not parse."""
    edited = apply_edits(text, [e for f in fixes for e in f.edits])
    try:
        return add_imports(edited, [i for f in fixes for i in f.imports])
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _fix_key(text: str, finding: Finding) -> tuple:
    """What identifies a fix across passes: its rule, the text it replaces and the
    text it puts in (positions move when other fixes add lines above it)."""
    offset = offsets(text)

    assert finding.fix is not None
    return finding.code, tuple(
        (text[offset(e.start):offset(e.end)], e.content) for e in finding.fix.edits
    )


def fix_text(text: str, path: str, settings: "Settings", *, unsafe: bool) -> FixResult:
    """Apply allowed fixes until nothing changes. A pass whose result does not
    parse or compile is retried fix by fix, and the fixes that break it are
    reported and left out."""
    applied = 0
    rejected: set[tuple] = set()
    errors: list[str] = []
    compiles = _python_verdict(text, full=True) is None
    for _ in range(MAX_FIX_PASSES):
        result = lint_text(text, path, settings)
        candidates = [
            f for f in result.findings
            if f.fix is not None
            and _fix_key(text, f) not in rejected
            and settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe)
        ]
        chosen = non_overlapping(f.fix for f in candidates)  # type: ignore[misc]
        if chosen and not applied and not errors and not _round_trips(text):
            errors.append(f"{path}: LibCST does not reproduce this file byte for byte (a form "
                          "feed before a statement?); not fixed")
            chosen = []
        if not chosen:
            result.errors[:0] = errors
            return FixResult(text, applied, result)
        new = _apply(text, chosen)
        if new is None or not _valid(new, path, compiles=compiles):
            by_fix = {id(f.fix): f for f in candidates}
            broke = False
            for fix in chosen:
                single = _apply(text, [fix])
                if single is None or not _valid(single, path, compiles=compiles):
                    bad = by_fix[id(fix)]
                    rejected.add(_fix_key(text, bad))
                    errors.append(
                        f"{path}:{bad.span.start.line}: fix for {bad.code} would break the "
                        "file; not applied"
                    )
                    broke = True
            if broke:
                continue
            # Each fix is fine alone but not all together: one per pass.
            chosen = chosen[:1]
            new = _apply(text, chosen)
            assert new is not None
        applied += len(chosen)
        text = new
    result = lint_text(text, path, settings)
    result.errors[:0] = [*errors, f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes"]
    return FixResult(text, applied, result)
