"""Lint one module's text: guard, parse once, run every enabled rule in one
walk, build findings, apply suppressions."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import libcst as cst

from ptlint.analysis.names import NameResolver, ScopeExit
from ptlint.analysis.semantic import SemanticModel
from ptlint.analysis.walk import walk
from ptlint.engine.guard import (lost_lines, parse, python_verdict, syntax_error, syntax_finding,
                                 too_deep)
from ptlint.engine.locate import build_findings
from ptlint.engine.suppress import UNUSED_NOQA, Directives, Notice
from ptlint.io.text import one_line
from ptlint.model import Finding
from ptlint.rule import Context, Rule, RuleError, rule_failed

if TYPE_CHECKING:
    from ptlint.config import Settings
    from ptlint.engine.reparse import Reparser


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors, one line each
    notices: list[Notice] = field(default_factory=list)  # warnings (invalid `# noqa`)


def lint_text(
    text: str,
    path: str,
    settings: "Settings",
    *,
    timings: dict[str, float] | None = None,
    parser: "Reparser | None" = None,
    cells: tuple[int, ...] = (),
) -> LintResult:
    """Lint one module's text. Never raises for bad input. `parser` (an editor's
    document) re-parses only what changed since the text it last parsed. `cells`:
    for a notebook's cells joined into one module, the line where each starts."""
    result = LintResult()
    directives = Directives() if settings.ignore_noqa else Directives.read(text)
    result.notices = directives.notices(path)
    if directives.file == "ALL":
        return result
    codes = [c for c in settings.codes_for(path) if c != UNUSED_NOQA]
    if directives.file:
        codes = [c for c in codes if c not in directives.file]
    ran = set(codes)
    rules = settings.rules_to_run(codes, text)
    if not _run_rules(text, path, settings, rules, directives, result, timings, parser, cells):
        return result
    if settings.is_enabled(UNUSED_NOQA, path) and not result.errors and UNUSED_NOQA not in (
        directives.file or ()
    ):
        unused = directives.unused(text, path, ran)
        result.findings.extend(f for f in unused if not directives.suppresses(f))
    result.findings.sort(key=lambda f: f.sort_key)
    return result


def _run_rules(text: str, path: str, settings: "Settings", rules: list[type[Rule]],
               directives: Directives, result: LintResult,
               timings: dict[str, float] | None, parser: "Reparser | None" = None,
               cells: tuple[int, ...] = ()) -> bool:
    """Run `rules` on the text into `result`, suppressions applied; False when
    the text does not parse (its PTL000 finding or error is in `result`)."""
    clock = time.perf_counter
    t0 = clock()
    if not rules:
        # No rule needs this file: CPython's own parser (several times cheaper
        # than LibCST's) is enough to report a syntax error.
        verdict = python_verdict(text)
        if verdict is not None and settings.is_enabled("PTL000", path):
            result.findings.append(syntax_finding(path, *verdict, text=text))
        if timings is not None:
            timings["syntax check only"] = timings.get("syntax check only", 0.0) + clock() - t0
        return verdict is None
    module = parser.reparse(text) if parser is not None else None
    problem = None if module is not None else too_deep(text, path)
    if module is None and problem is None:
        try:
            module = parse(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError, SyntaxError) as exc:
            problem = syntax_error(path, exc, text)
        else:
            if parser is not None:
                parser.remember(text, module)
    if problem is not None:
        if isinstance(problem, str):
            result.errors.append(problem)
        elif settings.is_enabled(problem.code, path):
            result.findings.append(problem)
        return False
    if timings is not None:
        timings["parse"] = timings.get("parse", 0.0) + clock() - t0

    names = NameResolver()
    context = Context(path=path, source=text, names=names, torch_version=settings.torch_version,
                      timings=timings, cells=cells)
    instances = []
    for rule in rules:
        try:
            instances.append(rule(context))
        except Exception as exc:  # noqa: BLE001 - one rule's bug must not hide the others
            result.errors.append(f"{path}: internal error in {rule.code}: {one_line(exc)}")
    visitors = [names, *instances, ScopeExit(names)]
    if any(rule.semantic for rule in instances):
        # built only for files an enabled rule needs it for, before every rule
        context.semantic = SemanticModel(names, timings)
        visitors.insert(1, context.semantic)

    def failed(visitor: object, exc: Exception) -> bool:
        if visitor is context.semantic and visitor is not None:  # the rules that rely on it fail
            for rule in instances:
                if rule.semantic and rule.failed is None:
                    rule.failed = RuleError(rule.code, exc)
            return True
        return rule_failed(visitor, exc)

    try:
        t0 = clock()
        try:
            walk(module, visitors, on_error=failed)
        except RecursionError:
            result.errors.append(f"{path}: too deeply nested for the rules; file skipped")
            return False
        if timings is not None:
            timings["rules"] = timings.get("rules", 0.0) + clock() - t0
        for rule in instances:
            if rule.failed is not None:
                failed = rule.failed
                result.errors.append(
                    f"{path}: internal error in {failed.code}: {one_line(failed.original)}")
        reports = [r for r in context.reports if r.rule.failed is None]
        if reports:
            t0 = clock()
            where = parser.where if parser is not None and parser.module is module else None
            findings = build_findings(module, text, reports, path, settings, result.errors, where)
            result.findings = [f for f in findings if not directives.suppresses(f)]
            if "\f" in text and any(f.fix for f in result.findings):
                result.findings = _without_lost_edits(result.findings, lost_lines(text))
            if timings is not None:
                timings["findings"] = timings.get("findings", 0.0) + clock() - t0
        return True
    finally:
        if context.semantic is not None:
            context.semantic.release()  # the tree is freed now (see `release`)


def _without_lost_edits(findings: list[Finding], lost: frozenset[int] | None) -> list[Finding]:
    """No fix whose edits touch a line LibCST does not reproduce (a form feed
    before a statement): its columns there are off, and its text would lose the
    form feed. None: every line counts as lost."""
    def touches(fix) -> bool:
        return lost is None or any(
            line in lost for e in fix.edits for line in range(e.start.line, e.end.line + 1))

    return [replace(f, fix=None) if f.fix and touches(f.fix) else f for f in findings]
