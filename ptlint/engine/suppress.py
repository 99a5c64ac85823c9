"""Suppression comments: `# noqa[: CODES]` on a finding's line and a file-wide
`# ptlint: noqa[: CODES]`. Rules never see them: findings are filtered here."""
from __future__ import annotations

import re
from typing import Sequence

from ptlint.io.text import line_text
from ptlint.model import Finding

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)
_FILE_NOQA = re.compile(r"^[ \t\f]*#\s*ptlint:\s*noqa\b(?::\s*(?P<codes>[A-Z0-9,\s]+))?", re.I | re.M)


def file_noqa(text: str) -> str | set[str] | None:
    match = _FILE_NOQA.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    if not codes:
        return "ALL"
    return {c.upper() for c in re.split(r"[,\s]+", codes) if c}


def noqa(finding: Finding, text: str, starts: Sequence[int]) -> bool:
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
