"""GitLab Code Quality report: paths relative to the repository root; fingerprints
hash the path, code and line text."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Mapping, Sequence

from ptlint.io.text import line_starts, line_text
from ptlint.model import Finding
from ptlint.output.where import (file_lines, in_cell, level, relative_to_root, repository_root,
                                 source_key)


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    root = repository_root()
    out = []
    seen: dict[str, int] = {}
    for f in findings:
        path = relative_to_root(f.path, root) or os.path.abspath(f.path)
        key = source_key(f.path, f.cell)
        text = sources.get(key, "")
        line = line_text(text, line_starts(text), f.span.start.line)
        identity = f"{path}\0{f.code}\0{f.cell}\0{line.strip()}"
        base = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        n = seen.get(base, 0)
        seen[base] = n + 1
        fingerprint = base if n == 0 else hashlib.sha256(f"{base}{n}".encode()).hexdigest()
        begin, end = file_lines(f, sources)
        where = in_cell(f)
        out.append({
            "description": f"{f.code} {f.message}" + (f" ({where})" if where else ""),
            "check_name": f.code,
            "fingerprint": fingerprint,
            "severity": "major" if level(f.code) == "error" else "minor",
            "location": {"path": path, "lines": {"begin": begin, "end": end}},
        })
    return json.dumps(out, indent=2) + "\n"
