"""`ptlint verify`'s output: a table and one block per rule for people (it fits
the terminal, 80 columns included), JSON for tools."""
from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import asdict

from ptlint.verify.compare import fmt_bytes, fmt_seconds
from ptlint.verify.model import NOISY, Row, Version

_STYLE = {"passed": "[green]passed[/]", "failed": "[bold red]FAILED[/]",
          "inconclusive": "[yellow]inconclusive[/]"}
LABEL = 12  # width of the labels of a rule's block ("  compared  ")


def _time_cell(v: Version) -> str:
    if v.error:
        return "error"
    return "-" if v.timing is None else fmt_seconds(v.timing.median)


def _peak_cell(v: Version) -> str:
    return "error" if v.error else fmt_bytes(v.peak)


def ratio_cell(row: Row) -> str:
    ratio = row.ratio
    if ratio is None:
        return "-"
    if row.speed is not None:
        return f"{ratio:.2f}x" + ("~" if row.speed.claim == "no measurable difference" else "")
    return f"{ratio:.2f}x" + ("?" if row.noisy else "")


def _wrap(label: str, text: str, width: int) -> list[str]:
    """`  label   text`, the text wrapped under itself."""
    head = f"  {label:<{LABEL - 2}}"
    return textwrap.wrap(text, width=max(width, LABEL + 20), initial_indent=head,
                         subsequent_indent=" " * LABEL, break_on_hyphens=False) or [head]


def launched(row: Row) -> str:
    """` x2` for a row whose fixed version ran under `torchrun --nproc_per_node=2`:
    a check launched both ways (NPROC = (1, 2)) has a row each."""
    return f" x{row.fixed.nproc}" if row.fixed.nproc > 1 else ""


def _block(row: Row, width: int) -> list[str]:
    status = "FAILED" if row.verdict == "failed" else row.verdict
    launch = f" (torchrun{launched(row)})" if launched(row) else ""
    lines = [f"{row.check.code} {row.check.name}{launch}: {status} on {row.device}"]
    lines += _wrap("compared", row.check.spec.compared, width)
    lines += _wrap("found", row.detail, width)
    for label, text in row.facts:
        lines += _wrap(label, text, width)
    if row.note:
        lines += _wrap("note", row.note.removeprefix(f"{row.check.code}: "), width)
    for v in (row.bad, row.fixed, row.reference):
        if v is not None and v.error:
            lines.append(f"  {v.label} ({v.path}):")
            lines += ["    " + line for line in v.error.rstrip().splitlines()]
    return lines


def render_table(rows: list[Row], header: str) -> None:
    from rich.console import Console
    from rich.table import Table

    width = shutil.get_terminal_size().columns  # $COLUMNS, the terminal, else 80
    console = Console(width=width, soft_wrap=False, highlight=False)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("rule", no_wrap=True)
    table.add_column("check", no_wrap=True)
    for column in ("bad time", "fixed time", "ratio", "bad peak", "fixed peak"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(row.check.code + launched(row), _STYLE[row.verdict],
                      _time_cell(row.bad), _time_cell(row.fixed), ratio_cell(row),
                      _peak_cell(row.bad), _peak_cell(row.fixed))
    for line in textwrap.wrap(header, width):
        console.print(line, markup=False)
    console.print()
    console.print(table)
    for row in rows:
        console.print()
        for line in _block(row, width):
            console.print(line, markup=False, overflow="ignore", crop=False)
    legend = (f"{tally(rows)}. Time: median of the calls of main() (of the runs, for a "
              "script run as a program); ratio: bad time / fixed time (above 1: the fix is "
              "faster); peak: memory use above the start of the call (CPU: resident set, "
              "CUDA: allocator; a program's whole peak).")
    if any(r.speed is not None and r.speed.claim == "no measurable difference" for r in rows):
        legend += (" ~: no measurable difference (the ratio's 95% confidence interval "
                   "includes 1).")
    if any(r.noisy and r.speed is None and r.comparable_time for r in rows):
        legend += (f" ?: noisy timing (interquartile range above {NOISY:.0%} of the median): "
                   "the machine is busy; trust the ratio less, or rerun with a larger "
                   "--min-time.")
    console.print()
    for line in textwrap.wrap(legend, width):
        console.print(line, markup=False)


def tally(rows: list[Row]) -> str:
    """`3 passed, 1 failed` (`, 1 inconclusive` when there is one)."""
    counts = {v: sum(r.verdict == v for r in rows) for v in ("passed", "failed", "inconclusive")}
    text = f"{counts['passed']} passed, {counts['failed']} failed"
    return text + (f", {counts['inconclusive']} inconclusive" if counts["inconclusive"] else "")


def _version_json(v: Version | None) -> dict | None:
    if v is None:
        return None
    return {
        "path": v.path, "device": v.device, "processes": v.nproc, "error": v.error,
        "wall_s": round(v.wall, 3),
        "time": asdict(v.timing) if v.timing else None,
        "peak_bytes": v.peak,
        "memory": [asdict(p) for p in v.memory],
        "note": v.note,
        "run": asdict(v.run) if v.run else None,
    }


def render_json(rows: list[Row], info: dict) -> str:
    return json.dumps({
        **info,
        "passed": not any(r.verdict == "failed" for r in rows),
        "checks": [{
            "rule": r.check.code, "name": r.check.name, "source": r.check.source,
            "device": r.device, "verdict": r.verdict, "passed": r.passed,
            "compared": r.check.spec.compared,
            "detail": r.detail, "ratio": r.ratio, "noisy_timing": r.noisy, "note": r.note,
            "speed": {**asdict(r.speed), "claim": r.speed.claim} if r.speed else None,
            "facts": [list(f) for f in r.facts],
            "bad": _version_json(r.bad), "fixed": _version_json(r.fixed),
            "reference": _version_json(r.reference),
        } for r in rows],
    }, indent=2)
