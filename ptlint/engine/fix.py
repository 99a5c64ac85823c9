"""Fix one module's text: apply the allowed fixes, re-parse, repeat until
nothing changes; then add the imports the fixes declared."""
from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import libcst as cst

from ptlint.analysis.names import dotted
from ptlint.engine.guard import fits_oldest_python, parse, python_verdict, round_trips, valid
from ptlint.engine.lint import LintResult, lint_text
from ptlint.io.text import apply_edits, lines_of, offsets
from ptlint.model import Finding, Fix

if TYPE_CHECKING:
    from ptlint.config import Settings

MAX_FIX_PASSES = 10


@dataclass
class FixResult:
    text: str
    applied: int
    result: LintResult  # findings that remain after fixing
    codes: Counter[str] = field(default_factory=Counter)  # the fixes applied, per code


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two ranges (start, end) touch: they share text, or start at the
    same place (two insertions there could go in either order)."""
    return a[0] < b[1] and b[0] < a[1] or a[0] == b[0]


def non_overlapping(fixes: Iterable[Fix]) -> list[Fix]:
    """Fixes whose edits touch no edit of a fix already taken (first come, first
    kept). A fix whose own edits overlap each other is never taken.

    The ranges taken so far never touch each other, so they are kept sorted by
    start and a new range need only be checked against its two neighbours:
    O(n log n) for n fixes (a file may have tens of thousands)."""
    taken: list[Fix] = []
    starts: list[tuple[int, int]] = []  # the taken ranges, sorted by start
    ends: list[tuple[int, int]] = []

    def clashes(rng: tuple) -> bool:
        i = bisect.bisect_right(starts, rng[0])  # starts[i - 1] <= start < starts[i]
        return (i > 0 and _overlap((starts[i - 1], ends[i - 1]), rng)) or (
            i < len(starts) and _overlap((starts[i], ends[i]), rng))

    for fix in sorted(fixes, key=lambda f: f.edits[0].start):
        own = sorted(((e.start.line, e.start.column), (e.end.line, e.end.column))
                     for e in fix.edits)
        # sorted by start, ranges overlap only if two neighbours do
        if any(_overlap(a, b) for a, b in zip(own, own[1:])) or any(map(clashes, own)):
            continue
        taken.append(fix)
        for start, end in own:
            i = bisect.bisect_right(starts, start)
            starts.insert(i, start)
            ends.insert(i, end)
    return taken


def _module_level_imports(module: cst.Module) -> set[str]:
    """The module's own `import x` / `from x import y` statements (no alias) among its
    top-level statements, where no statement above mentions the name they bind (so a
    fixed line above cannot need it): LibCST's `AddImportsVisitor` only sees those
    above the first other statement (`sys.path.append(...)`, say)."""
    found: set[str] = set()
    above = ""  # the code of the top-level statements so far
    for line in module.body:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                bound = {f"import {dotted(a.name)}": dotted(a.name).split(".")[0]
                         for a in small.names if a.asname is None}
            elif isinstance(small, cst.ImportFrom) and not small.relative and small.module \
                    and not isinstance(small.names, cst.ImportStar):
                bound = {f"from {dotted(small.module)} import {dotted(a.name)}": dotted(a.name)
                         for a in small.names if a.asname is None}
            else:
                continue
            found.update(statement for statement, name in bound.items()
                         if not re.search(rf"\b{re.escape(name)}\b", above))
        above += module.code_for_node(line)
    return found


def _after_first_torch_import(module: cst.Module, wanted: list[str]
                              ) -> tuple[cst.Module, list[str]]:
    """Torch imports placed right after the file's first top-level torch import
    when code runs above that one (`os.environ["CUDA_VISIBLE_DEVICES"] = "1"`,
    `os.environ["OMP_NUM_THREADS"] = "4"`: settings torch reads when it is loaded
    or starts, which an import added at the top would load torch before); the
    other imports, for `AddImportsVisitor`."""
    torch_wanted = [w for w in wanted if w.split()[1].split(".")[0] == "torch"]
    code_above = False
    for i, line in enumerate(module.body):
        smalls = line.body if isinstance(line, cst.SimpleStatementLine) else ()
        imports = [small for small in smalls if isinstance(small, (cst.Import, cst.ImportFrom))]
        modules = [dotted(a.name) for small in imports if isinstance(small, cst.Import)
                   for a in small.names] + [
                   dotted(small.module) for small in imports if isinstance(small, cst.ImportFrom)
                   and small.module is not None and not small.relative]
        if any((name or "").split(".")[0] == "torch" for name in modules):
            if not (code_above and torch_wanted):
                break
            added = [cst.parse_statement(statement) for statement in torch_wanted]
            body = [*module.body[:i + 1], *added, *module.body[i + 1:]]
            return (module.with_changes(body=body),
                    [w for w in wanted if w not in torch_wanted])
        docstring = i == 0 and len(smalls) == 1 and isinstance(smalls[0], cst.Expr) and \
            isinstance(smalls[0].value, (cst.SimpleString, cst.ConcatenatedString))
        if not docstring and (not smalls or any(
                not isinstance(small, (cst.Import, cst.ImportFrom, cst.Pass)) for small in smalls)):
            code_above = True
    return module, wanted


def add_imports(text: str, imports: Iterable[str]) -> str:
    """Add `import x` / `from x import y` statements the fixes need, once each."""
    wanted = sorted(set(imports))
    if not wanted:
        return text
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    module = parse(text)
    wanted = [w for w in wanted if w not in _module_level_imports(module)]
    if not wanted:
        return text
    module, wanted = _after_first_torch_import(module, wanted)
    context = CodemodContext()
    for statement in wanted:
        parts = statement.split()
        if parts[0] == "import":
            AddImportsVisitor.add_needed_import(context, parts[1])
        else:  # from a.b import c
            AddImportsVisitor.add_needed_import(context, parts[1], parts[3])
    code = (AddImportsVisitor(context).transform_module(module) if wanted else module).code
    if text.endswith("\r") and not code.endswith("\r"):
        code += "\r"  # LibCST drops a final lone \r (classic Mac line endings)
    if module.default_newline == "\r" and "\n" in text and not _lines_kept(text, code):
        # the new import's \r ran into the \n of a blank line after it, making one
        # \r\n line of two: the fix is refused rather than a line lost
        raise ValueError("the imports would change the file's mixed line endings")
    return code


def _lines_kept(text: str, code: str) -> bool:
    """Whether `code` is `text` with whole lines inserted (the imports) and every
    line of `text`, its line ending included, kept."""
    import difflib

    old, new = lines_of(text), lines_of(code)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return all(tag == "insert" for tag, *_ in matcher.get_opcodes() if tag != "equal")


def apply_fixes(text: str, fixes: Sequence[Fix]) -> str | None:
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
    parse or compile (or no longer fits the oldest Python supported) is retried
    fix by fix, and the fixes that break it are reported and left out."""
    applied = 0
    codes: Counter[str] = Counter()
    rejected: set[tuple] = set()
    errors: list[str] = []
    compiles = python_verdict(text, full=True) is None
    oldest = compiles and fits_oldest_python(text)  # then the fixed file must fit it too
    for _ in range(MAX_FIX_PASSES):
        result = lint_text(text, path, settings)
        candidates = [
            f for f in result.findings
            if f.fix is not None
            and _fix_key(text, f) not in rejected
            and settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe)
        ]
        # Edits are placed in the text itself, but imports are added by printing
        # the whole module with LibCST, which would drop a form feed it does not
        # reproduce (lint_text already left out the fixes on such a line).
        if "\f" in text and any(f.fix.imports for f in candidates) and not round_trips(text):
            for f in [f for f in candidates if f.fix.imports]:
                rejected.add(_fix_key(text, f))
                errors.append(f"{path}:{f.span.start.line}: fix for {f.code} adds an import, and "
                              "LibCST does not reproduce this file byte for byte (a form feed "
                              "before a statement?); not applied")
            candidates = [f for f in candidates if not f.fix.imports]
        chosen = non_overlapping(f.fix for f in candidates)  # type: ignore[misc]
        if not chosen:
            result.errors[:0] = errors
            return FixResult(text, applied, result, codes)
        new = apply_fixes(text, chosen)
        if new is None or not valid(new, path, compiles=compiles, oldest=oldest):
            by_fix = {id(f.fix): f for f in candidates}
            broke = False
            for fix in chosen:
                single = apply_fixes(text, [fix])
                if single is None or not valid(single, path, compiles=compiles, oldest=oldest):
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
            new = apply_fixes(text, chosen)
            assert new is not None
        applied += len(chosen)
        code_of = {id(f.fix): f.code for f in candidates}
        codes.update(code_of[id(fix)] for fix in chosen)
        text = new
    result = lint_text(text, path, settings)
    result.errors[:0] = [*errors, f"{path}: fixes did not converge after {MAX_FIX_PASSES} passes"]
    return FixResult(text, applied, result, codes)
