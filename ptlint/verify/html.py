"""`ptlint verify --report verify.html`: one self-contained HTML page, charts
drawn by matplotlib and inlined as PNG (no network, no files beside it).

For each checked pair: memory over steps, bad against fixed (a rule's swept
step counts, or a script's logged steps); the time of each version, round by
round; and what was compared, with its verdict.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from ptlint.verify.model import Row
from ptlint.verify.report import launched, ratio_cell, tally

MiB = 1024 * 1024
COLOURS = {"bad": "#c0392b", "fixed": "#2471a3"}
VERDICT_COLOURS = {"passed": "#1e8449", "failed": "#c0392b", "inconclusive": "#b9770e"}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-top: 1px solid #ccc;
padding-top: 1em; } .verdict { color: white; padding: 0.1em 0.5em; border-radius: 0.3em; }
table { border-collapse: collapse; } td, th { padding: 0.2em 0.8em; text-align: left;
vertical-align: top; } th { background: #eee; } .charts img { max-width: 48%; margin: 0.5%; }
code, pre { font-size: 0.9em; } pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
"""


def memory_series(row: Row) -> tuple[str, dict[str, list[tuple[float, float]]]] | None:
    """(x label, {"bad": [(step, MiB)], "fixed": [...]}) when memory was measured
    over steps: a rule's sweep (peak of main(steps=N)), or a script's logged steps."""
    series: dict[str, list[tuple[float, float]]] = {}
    label = ""
    for v in (row.bad, row.fixed):
        if v.run is not None and v.run.steps:
            label = f"{v.run.step_unit} (as the script logs it)"
            series[v.label] = [(float(s), b / MiB) for s, b in v.run.steps]
        else:
            for name in sorted({k for p in v.memory for k in p.params}):
                points = [(float(value), p.peak / MiB) for value, p in v.sweep(name)
                          if p.peak is not None]
                if len(points) > 1:
                    label = f"{name} (main({name}=N): peak of the call)"
                    series[v.label] = points
    return (label, series) if len(series) == 2 else None


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _memory_chart(row: Row) -> str | None:
    found = memory_series(row)
    if found is None:
        return None
    from matplotlib.figure import Figure

    label, series = found
    figure = Figure(figsize=(6, 3.6))
    axes = figure.subplots()
    for name, points in series.items():
        axes.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name,
                  color=COLOURS[name])
    axes.set_xlabel(label)
    axes.set_ylabel("memory (MiB)" + (", CUDA" if row.device.startswith("cuda") else ""))
    axes.set_title(f"{row.check.code} {row.check.name}: memory over steps")
    axes.grid(alpha=0.3)
    axes.legend()
    return _png(figure)


def _time_chart(row: Row) -> str | None:
    samples = {v.label: v.timing.samples for v in (row.bad, row.fixed)
               if v.timing is not None and v.timing.samples}
    if len(samples) != 2:
        return None
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.6))
    axes = figure.subplots()
    names = list(samples)
    unit, scale = ("ms", 1e3) if max(max(s) for s in samples.values()) < 1 else ("s", 1.0)
    axes.boxplot([[t * scale for t in samples[n]] for n in names], tick_labels=names,
                 widths=0.4)
    for i, name in enumerate(names, start=1):
        values = [t * scale for t in samples[name]]
        axes.scatter([i] * len(values), values, color=COLOURS[name], zorder=3, alpha=0.7)
    axes.set_ylabel(f"time ({unit}) per round")
    title = f"{row.check.code}: time, {len(samples['bad'])} interleaved rounds"
    if row.speed is not None:
        title += f"\nbad / fixed {row.speed.ratio:.2f}x (95% CI {row.speed.low:.2f}x to " \
                 f"{row.speed.high:.2f}x)"
    axes.set_title(title)
    axes.grid(alpha=0.3, axis="y")
    return _png(figure)


def _section(row: Row) -> str:
    e = html.escape
    colour = VERDICT_COLOURS[row.verdict]
    parts = [f'<h2>{e(row.check.code + launched(row))} {e(row.check.name)} '
             f'<span class="verdict" style="background:{colour}">{e(row.verdict)}</span> '
             f'on {e(row.device)}</h2>', "<table>",
             f"<tr><th>compared</th><td>{e(row.check.spec.compared)}</td></tr>",
             f"<tr><th>found</th><td>{e(row.detail)}</td></tr>"]
    parts += [f"<tr><th>{e(label)}</th><td><code>{e(text)}</code></td></tr>"
              if label in ("differs", "", "only bad", "only fixed") else
              f"<tr><th>{e(label)}</th><td>{e(text)}</td></tr>" for label, text in row.facts]
    if row.note:
        parts.append(f"<tr><th>note</th><td>{e(row.note)}</td></tr>")
    parts.append("</table>")
    charts = [(kind, c) for kind, c in (("memory over steps", _memory_chart(row)),
                                        ("time per round", _time_chart(row))) if c]
    if charts:
        parts.append('<div class="charts">' + "".join(
            f'<img alt="{e(row.check.code)} {kind}" src="data:image/png;base64,{c}">'
            for kind, c in charts) + "</div>")
    for v in (row.bad, row.fixed, row.reference):
        if v is not None and v.error:
            parts.append(f"<p>{e(v.label)} failed:</p><pre>{e(v.error)}</pre>")
    return "\n".join(parts)


def render_html(rows: list[Row], header: str) -> str:
    e = html.escape
    summary = "".join(
        f"<tr><td>{e(r.check.code + launched(r))}</td><td>{e(r.check.name)}</td>"
        f'<td style="color:{VERDICT_COLOURS[r.verdict]}">{e(r.verdict)}</td>'
        f"<td>{e(ratio_cell(r))}</td></tr>" for r in rows)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>ptlint verify</title><style>{STYLE}</style></head><body>\n"
            f"<h1>ptlint verify</h1><p>{e(header)}</p><p><b>{e(tally(rows))}</b></p>\n"
            f"<table><tr><th>rule</th><th>pair</th><th>verdict</th><th>bad / fixed time</th>"
            f"</tr>{summary}</table>\n<p>bad / fixed time above 1: the fix is faster; "
            "~: no measurable difference (the ratio's 95% confidence interval includes 1)."
            "</p>\n" + "\n".join(_section(r) for r in rows) +
            "\n</body></html>\n")


def write_html(rows: list[Row], header: str, path: Path) -> None:
    """Write the page atomically (a temporary file beside it, then renamed)."""
    import os
    import tempfile

    text = render_html(rows, header)
    path = path.resolve()
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as a file the user writes: mkstemp makes it private
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
