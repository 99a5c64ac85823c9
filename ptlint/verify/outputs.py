"""What a script prints, compared: the lines of the original against the fixed
version's, number by number, and the memory at each logged step.

A line is read as a template (its text, numbers replaced by `#`) and its
numbers. Timestamps and durations (`03:20:27`, `1.2s`, `35 it/s`) are masked
first: they differ from run to run. Lines are aligned by template; the numbers
of aligned lines must agree to within what the script printed (one unit in the
last digit shown) or, for longer numbers, the relative tolerance of results.
Python's warnings are not compared.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ptlint.verify.compare import DEFAULT_ATOL, DEFAULT_RTOL, slope

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|\b\d\d?:\d\d:\d\d(?:[.,]\d+)?")
_NUMBER_TEXT = r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?!\w)"
_NUMBER = re.compile(_NUMBER_TEXT)
_DURATION = re.compile(_NUMBER_TEXT.replace(r"(?!\w)", "") +
                       r"\s*(?:ms|us|s|sec|secs|seconds?|min|it/s|s/it)(?!\w)")
_WARNING = re.compile(r"\b\w*Warning: ")
_STEP = re.compile(r"\b(?:step|batch|iter|iteration)\s*[:#=]?\s*(\d+)", re.I)
_LOSS = re.compile(r"\bloss", re.I)


def template(line: str) -> tuple[str, list[str]]:
    """(the line with numbers as `#`, its numbers as printed)."""
    line = _DURATION.sub("<time>", _TIMESTAMP.sub("<time>", line.strip()))
    return _NUMBER.sub("#", line), _NUMBER.findall(line)


def compared_lines(lines: list[str]) -> list[str]:
    """The lines that are compared: not Python's warnings (nor the source line
    a warning shows under itself)."""
    out, after_warning = [], False
    for line in lines:
        if _WARNING.search(line):
            after_warning = True
            continue
        if after_warning and line[:1].isspace():
            continue
        after_warning = False
        if line.strip():
            out.append(line.rstrip())
    return out


def _agree(a: str, b: str) -> bool:
    x, y = float(a), float(b)
    if x == y:
        return True
    shown = max((len(t.split(".")[1].lower().split("e")[0]) if "." in t and "e" not in t.lower()
                 else 0) for t in (a, b))
    unit = 10.0 ** -shown if shown else 0.0  # one unit in the last digit printed
    return abs(x - y) <= max(unit * 1.0001, DEFAULT_RTOL * max(abs(x), abs(y)) + DEFAULT_ATOL)


@dataclass
class OutputDiff:
    values: int = 0  # numbers compared on aligned lines
    lines: int = 0  # aligned lines that hold numbers
    differing: list[tuple[str, str]] = field(default_factory=list)  # (bad, fixed)
    only_bad: list[str] = field(default_factory=list)
    only_fixed: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not (self.differing or self.only_bad or self.only_fixed)

    def largest_change(self) -> tuple[float, float] | None:
        """The largest |bad - fixed| among differing numbers, and its relative size."""
        best = None
        for a, b in self.differing:
            for x, y in zip(template(a)[1], template(b)[1]):
                gap = abs(float(x) - float(y))
                scale = max(abs(float(x)), abs(float(y)))
                if best is None or gap > best[0]:
                    best = (gap, gap / scale if scale else 0.0)
        return best


def compare_output(bad: list[str], fixed: list[str]) -> OutputDiff:
    bad, fixed = compared_lines(bad), compared_lines(fixed)
    tb, tf = [template(x) for x in bad], [template(x) for x in fixed]
    diff = OutputDiff()
    matcher = difflib.SequenceMatcher(None, [t for t, _ in tb], [t for t, _ in tf],
                                      autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                numbers = list(zip(tb[i][1], tf[j][1]))
                if numbers:
                    diff.lines += 1
                    diff.values += len(numbers)
                if not all(_agree(x, y) for x, y in numbers):
                    diff.differing.append((bad[i], fixed[j]))
        else:
            diff.only_bad += bad[i1:i2]
            diff.only_fixed += fixed[j1:j2]
    return diff


def steps(lines: list[tuple[str, str, int, int | None]]) -> tuple[list[tuple[int, int]], str]:
    """Memory at each line that logs a loss: [(step, bytes)], and what a step is.
    When most such lines number their step (`step 10`, `batch 10`, `iter 10`),
    those lines and numbers (counted on across epochs and phases that start again
    from 0); else every loss line, counted. Bytes are CUDA allocator bytes when
    CUDA was in use, else the resident set."""
    logged = [(text, cuda if cuda is not None else rss) for _, text, rss, cuda in lines
              if _LOSS.search(text) and _NUMBER.search(text) and not _WARNING.search(text)]
    numbered = [(m, used) for m, (text, used) in ((_STEP.search(t), (t, u)) for t, u in logged)
                if m]
    if logged and 2 * len(numbered) >= len(logged):
        out, offset, last = [], 0, -1
        for match, used in numbered:
            step = int(match.group(1)) + offset
            if step <= last:  # a new epoch (or phase) counts from 0 again
                offset, step = last + 1 - int(match.group(1)), last + 1
            out.append((step, used))
            last = step
        return out, numbered[0][0].group(0).split()[0].rstrip(":#=").lower()
    return [(i + 1, used) for i, (_, used) in enumerate(logged)], "logged loss"


def growth(points: list[tuple[int, int]]) -> float | None:
    """Bytes per step, least squares, leaving out the first point (warm-up: the
    allocator's caches fill during the first step)."""
    points = points[1:] if len(points) > 2 else points
    return slope([(float(x), float(y)) for x, y in points])
