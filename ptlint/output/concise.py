"""`path:line:col: CODE message`, one finding per line."""
from __future__ import annotations

from typing import Mapping, Sequence

from ptlint.model import Finding
from ptlint.output.where import location


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    return "".join(f"{location(f)}: {f.code} {f.message}\n" for f in findings)
