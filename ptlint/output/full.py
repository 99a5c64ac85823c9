"""The default, human format: position, code, message, the flagged lines and the fix."""
from __future__ import annotations

from typing import Mapping

from rich.console import Group
from rich.text import Text

from ptlint.model import Finding, Safety
from ptlint.textio import line_starts, line_text

MAX_LINES = 6


def render(findings: list[Finding], sources: Mapping[str, str]) -> Group:
    from ptlint.output import location, source_key

    parts: list[Text] = []
    starts_cache: dict[str, list[int]] = {}
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
            starts = starts_cache.setdefault(key, line_starts(text))
            first, last = f.span.start.line, f.span.end.line
            shown = list(range(first, min(last, first + MAX_LINES - 1) + 1))
            width = len(str(shown[-1]))
            for number in shown:
                source = line_text(text, starts, number).expandtabs(4)
                line = Text(f"{number:>{width}} | ", style="blue")
                line.append(source)
                parts.append(line)
            if first == last:
                pad = " " * (width + 3 + len(line_text(text, starts, first)[: f.span.start.column].expandtabs(4)))
                carets = max(f.span.end.column - f.span.start.column, 1)
                parts.append(Text(pad + "^" * carets, style="bold red"))
            elif last > shown[-1]:
                parts.append(Text(" " * width + " | ...", style="blue"))
        if f.fix is not None:
            label = {Safety.SAFE: "fix", Safety.UNSAFE: "unsafe fix"}.get(f.fix.safety, "suggestion")
            parts.append(Text(f"  = help ({label}): {f.fix.title}", style="cyan"))
        parts.append(Text(""))
    return Group(*parts)
