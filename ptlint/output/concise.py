"""`path:line:col: CODE message`, one finding per line."""
from __future__ import annotations

from typing import Mapping

from ptlint.model import Finding


def render(findings: list[Finding], sources: Mapping[str, str]) -> str:
    from ptlint.output import location

    return "".join(f"{location(f)}: {f.code} {f.message}\n" for f in findings)
