"""SARIF 2.1.0, with `tool.driver.rules` built from the rule registry.

Paths inside the repository are URI references relative to `%SRCROOT%` (the
repository root, as GitHub code scanning resolves them); other files are
absolute `file:` URIs. Columns count Unicode code points. A notebook finding
points at the lines of the `.ipynb` file that hold it; its cell, line and
column are in the message. Errors of the run are tool execution notifications.
Each rule carries its whole documentation as `help`: there is no page to point
`helpUri` at.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import quote

from ptlint import __version__
from ptlint.model import Finding, cell_number
from ptlint.output.where import file_lines, in_cell, level, relative_to_root, repository_root

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ROOT = "%SRCROOT%"


def _rule(rule: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {"tags": list(rule.tags)}
    if rule.security_severity is not None:  # GitHub ranks security alerts by it
        properties["security-severity"] = f"{rule.security_severity:.1f}"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.description().replace("`", "")},
        "fullDescription": {"text": rule.summary().replace("`", "")},
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "defaultConfiguration": {"level": level(rule.code)},
        "properties": properties,
    }


def _artifact(path: str, root: Path) -> dict[str, str]:
    relative = relative_to_root(path, root)
    if relative is None:
        return {"uri": Path(os.path.abspath(path)).as_uri()}
    return {"uri": quote(os.fsencode(relative)), "uriBaseId": ROOT}


def _result(f: Finding, index: int, sources: Mapping[str, str], root: Path) -> dict[str, Any]:
    message = f.message.replace("`", "'")
    if f.cell is None:
        region = {
            "startLine": f.span.start.line,
            "startColumn": f.span.start.column + 1,
            "endLine": f.span.end.line,
            "endColumn": max(f.span.end.column + 1, 1),
        }
    else:  # the lines of the .ipynb file; the position in the cell goes in the message
        start, end = file_lines(f, sources)
        region = {"startLine": start, "endLine": end}
        message += f" ({in_cell(f)})"
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": index,
        "level": level(f.code),
        "message": {"text": message},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(f.path, root),
                                            "region": region}}],
    }
    if f.cell is not None:
        result["properties"] = {"cell": cell_number(f.cell), "cellLine": f.span.start.line,
                                "cellColumn": f.span.start.column + 1}
    return result


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    from ptlint.rule import registry  # the rules' documentation goes into the log

    rules = list(registry().values())
    index = {r.code: i for i, r in enumerate(rules)}
    driver_rules = [_rule(r) for r in rules]
    driver_rules.append({
        "id": "PTL000", "name": "syntax-error",
        "shortDescription": {"text": "The file could not be parsed"},
        "help": {"text": "The file is not valid Python (or not valid in its declared encoding) "
                         "at the position given; no other rule could run on it."},
        "defaultConfiguration": {"level": level("PTL000")},
    })
    index["PTL000"] = len(driver_rules) - 1
    root = repository_root()
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "ptlint",
                "version": __version__,
                "rules": driver_rules,
            }},
            "invocations": [{
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": e}} for e in errors
                ],
            }],
            "originalUriBaseIds": {ROOT: {"uri": root.as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(f, index[f.code], sources, root) for f in findings],
        }],
    }
    return json.dumps(log, indent=2) + "\n"
