"""GitLab Code Quality report: fingerprints hash the path, code and line text."""
from __future__ import annotations

import hashlib
import json
from typing import Mapping

from ptlint.io.text import line_starts, line_text
from ptlint.model import Finding
from ptlint.output.where import source_key


def render(findings: list[Finding], sources: Mapping[str, str]) -> str:

    out = []
    seen: dict[str, int] = {}
    for f in findings:
        key = source_key(f.path, f.cell)
        text = sources.get(key, "")
        line = line_text(text, line_starts(text), f.span.start.line)
        identity = f"{f.path}\0{f.code}\0{f.cell}\0{line.strip()}"
        base = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        n = seen.get(base, 0)
        seen[base] = n + 1
        fingerprint = base if n == 0 else hashlib.sha256(f"{base}{n}".encode()).hexdigest()
        out.append({
            "description": f"{f.code} {f.message}",
            "check_name": f.code,
            "fingerprint": fingerprint,
            "severity": "major" if f.code[3] == "0" else "minor",
            "location": {"path": f.path, "lines": {"begin": f.span.start.line,
                                                    "end": f.span.end.line}},
        })
    return json.dumps(out, indent=2) + "\n"
