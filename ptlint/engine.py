"""Parse once, run every enabled rule in one traversal, build findings in one place."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    WhitespaceInclusivePositionProvider,
)

from ptlint.model import SYNTAX_ERROR, Edit, Finding, Fix, Position, Span
from ptlint.names import NameResolver, ScopeExit
from ptlint.rule import Context, Report, Rule
from ptlint.textio import line_starts, line_text

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


def _syntax_error(path: str, exc: Exception) -> Finding:
    line = getattr(exc, "raw_line", None) or getattr(exc, "lineno", None) or 1
    column = getattr(exc, "raw_column", None)
    if column is None:
        column = max((getattr(exc, "offset", None) or 1) - 1, 0)
    if isinstance(exc, RecursionError):
        detail = "too deeply nested to parse"
    else:
        detail = getattr(exc, "message", None) or str(exc).splitlines()[0] or type(exc).__name__
    code, name = SYNTAX_ERROR
    start = Position(line, column)
    return Finding(path, code, name, f"SyntaxError: {detail}", Span(start, start))


def parse(text: str) -> cst.Module:
    return cst.parse_module(text)


def active_rules(text: str, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The rules whose `requires_text` the file satisfies: the rest need no parse."""
    return [r for r in rules if not r.requires_text or any(t in text for t in r.requires_text)]


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
    try:
        module = parse(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError, SyntaxError) as exc:
        finding = _syntax_error(path, exc)
        if settings.is_enabled(finding.code, path):
            result.findings.append(finding)
        return result
    if timings is not None:
        timings["parse"] = timings.get("parse", 0.0) + clock() - t0
    if not rules:
        return result

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    names = NameResolver()
    context = Context(path=path, source=text, names=names, torch_version=settings.torch_version,
                      timings=timings)
    instances = [rule(context) for rule in rules]
    t0 = clock()
    try:
        wrapper.visit_batched([names, *instances, ScopeExit(names)])
    except RecursionError:
        result.errors.append(f"{path}: too deeply nested for the rules; file skipped")
        return result
    if timings is not None:
        timings["rules"] = timings.get("rules", 0.0) + clock() - t0
    for rule in instances:
        if rule.failed is not None:
            result.errors.append(f"{path}: internal error in {rule.failed}")
    reports = [r for r in context.reports if r.rule.failed is None]
    if reports:
        t0 = clock()
        findings = _build_findings(wrapper, module, reports, path, settings)
        starts = line_starts(text)
        result.findings = [f for f in findings if not _noqa(f, text, starts)]
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


def _noqa(finding: Finding, text: str, starts: list[int]) -> bool:
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


def _position(pos: object) -> Position:
    return Position(pos.line, pos.column)  # type: ignore[attr-defined]


def _build_findings(
    wrapper: MetadataWrapper,
    module: cst.Module,
    reports: list[Report],
    path: str,
    settings: "Settings",
) -> list[Finding]:
    """Turn reports into findings. Positions are computed only here, for files
    that have something to report."""
    positions = wrapper.resolve(PositionProvider)
    inclusive = None
    parents = None
    findings = []
    for report in reports:
        code = report.rule.code
        if not settings.is_enabled(code, path):
            continue
        where = positions[report.node]
        fix = None
        if report.edits:
            if inclusive is None:
                inclusive = wrapper.resolve(WhitespaceInclusivePositionProvider)
            edits = []
            for old, new in report.edits:
                span = inclusive[old]
                content = "" if new is None else module.code_for_node(new)
                if "\n" in content:  # continuation lines and statements need the block's indent
                    if parents is None:
                        parents = wrapper.resolve(ParentNodeProvider)
                    content = _code_at(module, new, _block_indent(module, parents, old))
                edits.append(Edit(_position(span.start), _position(span.end), content))
            fix = Fix(
                title=report.fix_title or "Apply the fix",
                safety=settings.safety_for(code, report.safety),
                edits=tuple(sorted(edits)),
                imports=report.imports,
            )
        findings.append(
            Finding(
                path=path,
                code=code,
                name=report.rule.name,
                message=report.message,
                span=Span(_position(where.start), _position(where.end)),
                fix=fix,
                url=report.rule.url(),
            )
        )
    return findings


def _block_indent(module: cst.Module, parents, node: cst.CSTNode) -> str:
    """The indentation LibCST's codegen has in effect where `node` is rendered."""
    parts = []
    while node in parents:
        node = parents[node]
        if isinstance(node, cst.IndentedBlock):
            parts.append(module.default_indent if node.indent is None else node.indent)
    return "".join(reversed(parts))


def _code_at(module: cst.Module, node: cst.CSTNode, indent: str) -> str:
    """`module.code_for_node(node)` as if rendered inside blocks indented by `indent`."""
    state = CodegenState(default_indent=module.default_indent,
                         default_newline=module.default_newline,
                         indent_tokens=[indent] if indent else [])
    node._codegen(state)
    return "".join(state.tokens)


# -- fixing -----------------------------------------------------------------
def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    starts = line_starts(text)

    def offset(pos: Position) -> int:
        return starts[pos.line - 1] + pos.column

    out, last = [], 0
    for edit in sorted(edits):
        begin, end = offset(edit.start), offset(edit.end)
        out.append(text[last:begin])
        out.append(edit.content)
        last = end
    out.append(text[last:])
    return "".join(out)


def non_overlapping(fixes: Iterable[Fix]) -> list[Fix]:
    """Fixes whose edits touch no edit of a fix already taken (first come, first kept)."""
    taken: list[Fix] = []
    ranges: list[tuple[Position, Position]] = []
    for fix in sorted(fixes, key=lambda f: f.edits[0].start):
        if any(
            e.start < end and start < e.end or e.start == start
            for e in fix.edits
            for start, end in ranges
        ):
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
    module = AddImportsVisitor(context).transform_module(parse(text))
    return module.code


def _valid(text: str, path: str) -> bool:
    try:
        parse(text)
        compile(text, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError):
        return False
    return True


def fix_text(text: str, path: str, settings: "Settings", *, unsafe: bool) -> FixResult:
    """Apply allowed fixes until nothing changes. A pass whose result does not
    parse or compile is retried fix by fix, and the fixes that break it are
    reported and left out."""
    applied = 0
    rejected: set[tuple[str, Span]] = set()
    errors: list[str] = []
    compiles = _valid(text, path)
    for _ in range(MAX_FIX_PASSES):
        result = lint_text(text, path, settings)
        candidates = [
            f for f in result.findings
            if f.fix is not None
            and (f.code, f.span) not in rejected
            and settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe)
        ]
        chosen = non_overlapping(f.fix for f in candidates)  # type: ignore[misc]
        if not chosen:
            result.errors[:0] = errors
            return FixResult(text, applied, result)
        new = add_imports(apply_edits(text, [e for f in chosen for e in f.edits]),
                          [i for f in chosen for i in f.imports])
        if compiles and not _valid(new, path):
            by_fix = {id(f.fix): f for f in candidates}
            for fix in chosen:
                single = add_imports(apply_edits(text, fix.edits), fix.imports)
                if not _valid(single, path):
                    bad = by_fix[id(fix)]
                    rejected.add((bad.code, bad.span))
                    errors.append(
                        f"{path}:{bad.span.start.line}: fix for {bad.code} would break the "
                        "file; not applied"
                    )
            continue
        applied += len(chosen)
        text = new
    result = lint_text(text, path, settings)
    result.errors[:0] = [*errors, f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes"]
    return FixResult(text, applied, result)
