"""Suppression comments: `# noqa[: CODES]` on a finding's line and a file-wide
`# ptlint: noqa[: CODES]`. Rules never see them: findings are filtered here."""
from __future__ import annotations

import re
from typing import Iterable

from ptlint.io.text import line_starts, line_text
from ptlint.model import Finding

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^[ \t\f]*#\s*ptlint:\s*noqa\b(?::\s*(?P<codes>[A-Z0-9,\s]+))?", re.I | re.M)


def file_noqa(text: str) -> str | set[str] | None:
    match = _FILE_NOQA.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return "ALL"
    return {c.upper() for c in re.split(r"[,\s]+", codes) if c}


def _line_codes(line: str) -> str | set[str] | None:
    """What a line's `# noqa` comments suppress: "ALL", some codes, or nothing."""
    if "noqa" not in line.lower():
        return None
    codes: set[str] = set()
    for match in NOQA.finditer(line):
        listed = match.group("codes")
        if listed is None:
            return "ALL"
        codes |= {c.upper() for c in re.split(r"[,\s]+", listed)}
    return codes or None


def without_noqa(findings: Iterable[Finding], text: str) -> list[Finding]:
    """The findings that no `# noqa` on their first line suppresses. Each line is
    read once, however many findings it has (a generated line may have thousands)."""
    starts = line_starts(text)
    by_line: dict[int, str | set[str] | None] = {}
    out = []
    for finding in findings:
        line = finding.span.start.line
        if line not in by_line:
            by_line[line] = _line_codes(line_text(text, starts, line))
        codes = by_line[line]
        if codes is None or (codes != "ALL" and finding.code not in codes):
            out.append(finding)
    return out
