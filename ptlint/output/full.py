"""The default, human format: position, code, message, the flagged lines and the fix."""
from __future__ import annotations

from typing import Mapping, Sequence

from rich.console import Group
from rich.text import Text

from ptlint.io.text import line_starts, line_text
from ptlint.model import Finding, Safety
from ptlint.output.where import location, source_key

MAX_LINES = 6
MAX_WIDTH = 300  # characters of a quoted line (minified and generated code has huge ones)
# Control characters are quoted as their Unicode pictures: a file must not be able
# to send escape sequences to the terminal of whoever lints it.
_PICTURES = {c: 0x2400 + c for c in range(32) if c != 9} | {127: 0x2421}


def _quote(line: str, column: int) -> tuple[str, int]:
    """`line` as shown (controls made visible, cut to MAX_WIDTH around `column`,
    tabs expanded) and how many display columns precede `column` in it."""
    line = line.translate(_PICTURES)
    cut = 0
    if len(line) > MAX_WIDTH:
        cut = max(0, min(column - MAX_WIDTH // 4, len(line) - MAX_WIDTH))
        tail = "…" if cut + MAX_WIDTH < len(line) else ""
        line = ("…" if cut else "") + line[cut:cut + MAX_WIDTH] + tail
        column = column - cut + (1 if cut else 0)
    return line.expandtabs(4), len(line[:max(column, 0)].expandtabs(4))


def render(findings: list[Finding], sources: Mapping[str, str],
           errors: Sequence[str] = ()) -> Group:

    parts: list[Text] = []
    for f in findings:
        head = Text()
        head.append(location(f), style="bold")
        head.append(": ")
        head.append(f.code, style="bold red")
        head.append(f" {f.message}")
        parts.append(head)
        key = source_key(f.path, f.cell)
        text = sources.get(key)
        if text is not None:
            starts = line_starts(text)
            first, last = f.span.start.line, f.span.end.line
            shown = list(range(first, min(last, first + MAX_LINES - 1) + 1))
            width = len(str(shown[-1]))
            for number in shown:
                source, before = _quote(line_text(text, starts, number), f.span.start.column)
                line = Text(f"{number:>{width}} | ", style="blue")
                line.append(source)
                parts.append(line)
            if first == last:
                pad = " " * (width + 3 + before)
                carets = min(max(f.span.end.column - f.span.start.column, 1), MAX_WIDTH)
                parts.append(Text(pad + "^" * carets, style="bold red"))
            elif last > shown[-1]:
                parts.append(Text(" " * width + " | ...", style="blue"))
        if f.fix is not None:
            label = {Safety.SAFE: "fix", Safety.UNSAFE: "unsafe fix"}.get(f.fix.safety, "suggestion")
            parts.append(Text(f"  = help ({label}): {f.fix.title}", style="cyan"))
        parts.append(Text(""))
    return Group(*parts)
