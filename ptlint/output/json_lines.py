"""One JSON object per line, each the `json` format's object for one finding
(ruff's `json-lines`): a stream that line-oriented tools can read as it comes."""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from ptlint.model import Finding
from ptlint.output.json import as_dict


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    return "".join(json.dumps(as_dict(f)) + "\n" for f in findings)
