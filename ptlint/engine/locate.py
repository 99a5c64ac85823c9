"""From reports to findings: where reported nodes and edited nodes are, and
the text of each edit, found by printing only what is needed."""
from __future__ import annotations

import bisect
import dataclasses
import re
from contextlib import contextmanager
from itertools import accumulate
from typing import TYPE_CHECKING, Callable, Iterable

import libcst as cst
from libcst._nodes.internal import CodegenState

from ptlint.analysis.walk import child_fields, children, descendants
from ptlint.engine import safety
from ptlint.engine.guard import has_fstrings
from ptlint.io.text import line_starts, one_line
from ptlint.model import Edit, Finding, Fix, Position, Safety, Span
from ptlint.rule import Report

if TYPE_CHECKING:
    from ptlint.config import Settings

# a marimo notebook: each cell gets its modules as parameters, so an import added
# at the top of the file does not reach the cell a fix changes
_MARIMO = re.compile(r"(?m)^import marimo\b")


class Locator(CodegenState):
    """Where chosen nodes start and end, found in one code generation pass.

    LibCST's PositionProvider and WhitespaceInclusivePositionProvider track
    line and column token by token and keep a range for every node: ten times
    the cost of printing the module, each. This state only notes how many
    tokens were printed when a wanted node starts and ends, and turns those
    counts into lines and columns at the end. `syntactic` nodes get
    PositionProvider's range (whitespace excluded where LibCST records a
    syntactic position, else the inclusive one), `inclusive` nodes get
    WhitespaceInclusivePositionProvider's and the indentation of their block.

    When `source` is the module's text, only statements that hold a wanted
    node are printed: for each wanted node, the innermost statement of a block
    around it whose text (printed at its block's indentation) occurs once in
    `source`, at the start of a line, or is where `where` says it starts (an
    editor's `Reparser` knows); the text skipped in between becomes one token. Failing that, the top-level statements that hold wanted nodes, each
    found in `source` after the one before and not occurring again before the
    next one. Otherwise (an ambiguous text, or LibCST does not reproduce the
    file) the whole module is printed.
    """

    def __init__(self, module: cst.Module, syntactic: Iterable[cst.CSTNode],
                 inclusive: Iterable[cst.CSTNode], source: str | None = None,
                 where: Callable[[list[cst.CSTNode]], int | None] | None = None) -> None:
        super().__init__(default_indent=module.default_indent,
                         default_newline=module.default_newline)
        self.wanted = {id(n) for n in syntactic}
        self.wanted_inclusive = {id(n) for n in inclusive} | self.wanted
        self.indents: dict[int, tuple[str, ...]] = {}  # block indentation of inclusive nodes
        self.opened: dict[int, int] = {}
        self.inclusive: dict[int, tuple[int, int]] = {}
        self.syntactic: dict[int, tuple[int, int]] = {}
        # the innermost statement around each wanted node, where the partial
        # printing found them all (else empty)
        self.statements: dict[int, cst.CSTNode] = {}
        if source is not None and not module.has_trailing_newline:
            source += module.default_newline  # printed alone, a last statement ends in one
        self.partial = source is not None and (
            self._print_innermost(module, source, where)
            or self._print_statements(module, source))
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

    def _print_innermost(self, module: cst.Module, source: str,
                         where: Callable[[list[cst.CSTNode]], int | None] | None) -> bool:
        """Print, for each wanted node, the innermost statement around it whose
        text is unique in `source`, or which `where` (statements from the top
        level down -> where the last starts, if known) places; False if that
        cannot be done."""
        if "\f" in source:  # LibCST drops form feeds: a statement's text may not be in `source`
            return False
        chains = _statement_chains(module, self.wanted_inclusive)
        if len(chains) < len(self.wanted_inclusive):
            return False
        self.statements = {key: chain[-1][0] for key, chain in chains.items()}
        printed: dict[int, tuple[int, str] | None] = {}  # statement -> (where, text)

        def line_start(at: int) -> bool:
            return at == 0 or source[at - 1] in "\r\n"

        def place(chain: tuple) -> tuple[int, str] | None:
            statement, indent = chain[-1]
            if id(statement) not in printed:
                text = _printed(module, statement, indent)
                at = where([s for s, _ in chain]) if where is not None else None
                if at is not None and line_start(at) and source.startswith(text, at):
                    printed[id(statement)] = (at, text)
                    return printed[id(statement)]
                at = source.find(text)
                unique = at >= 0 and line_start(at) and source.find(text, at + 1) < 0
                printed[id(statement)] = (at, text) if unique else None
            return printed[id(statement)]

        # statement -> (where, text, statement, indent, the statements around it)
        chosen: dict[int, tuple[int, str, cst.CSTNode, tuple[str, ...], set[int]]] = {}
        for chain in {id(c[-1][0]): c for c in chains.values()}.values():
            for depth in range(len(chain) - 1, -1, -1):
                statement, indent = chain[depth]
                if any(id(outer) in chosen for outer, _ in chain[:depth]):
                    break  # an enclosing statement is printed already
                found = place(chain[:depth + 1])
                if found is not None:
                    chosen[id(statement)] = (*found, statement, indent,
                                             {id(outer) for outer, _ in chain[:depth]})
                    break
            else:
                return False
        units = sorted(chosen.values(), key=lambda unit: unit[0])
        # a statement chosen for one node may hold another chosen statement
        kept = []
        for unit in units:
            if kept and unit[0] < kept[-1][0] + len(kept[-1][1]):
                if unit[0] + len(unit[1]) > kept[-1][0] + len(kept[-1][1]) or \
                        id(kept[-1][2]) not in unit[4]:
                    # overlapping texts, or the text of another statement (the last
                    # line of a file without its newline reads like an earlier one)
                    return False
                continue  # inside the one before: printed with it
            kept.append(unit)
        self._reset()
        done = 0
        for at, text, statement, indent, _ in kept:
            self.tokens.append(source[done:at])
            self.indent_tokens = list(indent)
            statement._codegen(self)
            done = at + len(text)
        self.indent_tokens = []
        return True

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


def build_findings(
    module: cst.Module,
    source: str,
    reports: list[Report],
    path: str,
    settings: "Settings",
    errors: list[str] | None = None,
    where: Callable[[list[cst.CSTNode]], int | None] | None = None,
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
    locator = Locator(module, (r.node for r in reports), [*olds, *anchors], source, where)
    indents = locator.indents
    # new code that goes into an f-string must not use its quotes (before Python 3.12)
    quotes = {}
    if olds and has_fstrings(source):
        # an f-string holds no statement: the statements around the edits hold
        # every f-string around them
        known = locator.statements
        roots = ({id(known[id(old)]): known[id(old)] for old in olds}.values()
                 if all(id(old) in known for old in olds) else [module])
        quotes = safety.fstring_quotes(roots, olds)
    scopes = safety.Scopes(module, {safety.bound_name(i) for r in reports for i in r.imports},
                           [old for r in reports if r.imports for old, _ in r.edits])
    cells_apart = any(r.imports for r in reports) and _MARIMO.search(source) is not None
    findings = []
    for report in reports:
        code = report.rule.code
        try:
            where = locator.span(report.node)
            fix = None
            pairs = safety.in_fstrings(report.edits, quotes)
            if pairs and report.imports and (
                    cells_apart or not safety.imports_reach(scopes, pairs, report.imports)):
                pairs = []  # the import would not be what the new code finds: no fix
            if pairs:
                edits = []
                removed: list[cst.CSTNode] = []  # what the edits take out, and put in
                added_nodes: list[cst.CSTNode | None] = []
                for (old, new), plan in zip(pairs, plans[id(report)]):
                    if plan is not None:  # only the statements that change in a block
                        first, last, added, how = plan
                        start, end = (locator.inclusive_span(first).start,
                                      locator.inclusive_span(last).end)
                        if how == "before":
                            end = start
                        elif how == "after":
                            start = end
                        else:
                            body = list(old.body)
                            removed += body[body.index(first):body.index(last) + 1]
                        added_nodes += added
                        content = "".join(_printed(module, s, indents[id(first)]) for s in added)
                        edits.append(Edit(start, end, content))
                        continue
                    span = locator.inclusive_span(old)
                    removed.append(old)
                    added_nodes.append(new)
                    content = "" if new is None else edit_content(module, old, new, span, indents)
                    edits.append(Edit(span.start, span.end, content))
                declared = report.safety
                if declared is Safety.SAFE and safety.drops_comments(removed, added_nodes):
                    declared = Safety.UNSAFE  # a safe fix keeps comments
                fix = Fix(
                    title=report.fix_title or "Apply the fix",
                    safety=settings.safety_for(code, declared),
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
            )
        )
    return findings


def _statement_chains(module: cst.Module, wanted: set[int]) -> dict[int, tuple]:
    """For each wanted node (by `id`), the statements of blocks around it, outermost
    first, each with the indentation of its block: ((statement, indent), ...).
    One walk, which stops once every wanted node is found."""
    found: dict[int, tuple] = {}
    stack = [(s, ((s, ()),), ()) for s in reversed(module.body)]
    while stack and len(found) < len(wanted):
        node, chain, indent = stack.pop()
        if id(node) in wanted:
            found[id(node)] = chain
        inner = children(node)
        if type(node) is cst.IndentedBlock:
            indent = (*indent, module.default_indent if node.indent is None else node.indent)
            stack.extend((child, (*chain, (child, indent)), indent) for child in reversed(inner))
        else:
            stack.extend((child, chain, indent) for child in reversed(inner))
    return found


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


def edit_content(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode, span: object,
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
