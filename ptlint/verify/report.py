"""`ptlint verify`'s output: the table for people, JSON for tools."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

from ptlint.verify.compare import fmt_bytes, fmt_seconds
from ptlint.verify.model import NOISY, Row, Version


def _time_cell(v: Version) -> str:
    if v.error:
        return "error"
    if v.timing is None:
        return "-"
    return f"{fmt_seconds(v.timing.median)} ±{fmt_seconds(v.timing.iqr / 2)}"


def render_table(rows: list[Row], header: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, highlight=False,
                      width=None if sys.stdout.isatty() else 150)
    table = Table(title=header, header_style="bold", title_justify="left")
    for column, kw in (("rule", {"no_wrap": True}), ("device", {"no_wrap": True}),
                       ("check", {"no_wrap": True}), ("what was compared", {"ratio": 1}),
                       ("bad time", {"justify": "right", "no_wrap": True}),
                       ("fixed time", {"justify": "right", "no_wrap": True}),
                       ("ratio", {"justify": "right", "no_wrap": True}),
                       ("bad peak", {"justify": "right", "no_wrap": True}),
                       ("fixed peak", {"justify": "right", "no_wrap": True})):
        table.add_column(column, overflow="fold", **kw)
    for row in rows:
        ratio = row.ratio
        device = row.device if row.fixed.nproc == 1 else f"{row.device}, fixed x{row.fixed.nproc}"
        table.add_row(
            row.check.code, device,
            "[green]passed[/]" if row.passed else "[bold red]FAILED[/]",
            row.check.spec.compared,
            _time_cell(row.bad), _time_cell(row.fixed),
            "-" if ratio is None else f"{ratio:.2f}x" + ("?" if row.noisy else ""),
            "error" if row.bad.error else fmt_bytes(row.bad.peak),
            "error" if row.fixed.error else fmt_bytes(row.fixed.peak),
        )
    console.print(table)
    for row in rows:
        status = "passed" if row.passed else "FAILED"
        console.print(f"{row.check.code} {row.check.name} {status}: {row.detail}", markup=False)
        if row.note:
            console.print(f"  note: {row.note}", markup=False)
        for v in (row.bad, row.fixed, row.reference):
            if v is not None and v.error:
                console.print(f"  {v.label} ({v.path}):\n{v.error}", markup=False)
    failed = sum(not r.passed for r in rows)
    console.print(f"{len(rows) - failed} passed, {failed} failed. Time: median ± half the "
                  "interquartile range of main() calls; ratio: bad time / fixed time (above 1: "
                  "the fix is faster); peak: memory use above the start of the call (CPU: "
                  "resident set, CUDA: allocator).", markup=False)
    if any(r.noisy for r in rows):
        console.print(f"?: noisy timing (interquartile range above {NOISY:.0%} of the median):"
                      " the machine is busy; trust the ratio less, or rerun with a larger "
                      "--min-time.", markup=False)


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
    }


def render_json(rows: list[Row], info: dict) -> str:
    return json.dumps({
        **info,
        "passed": all(r.passed for r in rows),
        "checks": [{
            "rule": r.check.code, "name": r.check.name, "source": r.check.source,
            "device": r.device, "passed": r.passed, "compared": r.check.spec.compared,
            "detail": r.detail, "ratio": r.ratio, "noisy_timing": r.noisy, "note": r.note,
            "bad": _version_json(r.bad), "fixed": _version_json(r.fixed),
            "reference": _version_json(r.reference),
        } for r in rows],
    }, indent=2)
