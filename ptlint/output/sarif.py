"""SARIF 2.1.0, with `tool.driver.rules` built from the rule registry."""
from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, Mapping

from ptlint import __version__
from ptlint.model import Finding

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rule(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.description().replace("`", "")},
        "fullDescription": {"text": rule.summary().replace("`", "")},
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": "error" if rule.code[3] == "0" else "warning"},
        "properties": {"tags": list(rule.tags)},
    }


def render(findings: list[Finding], sources: Mapping[str, str]) -> str:
    from ptlint.rule import registry  # the rules' documentation goes into the log

    rules = list(registry().values())
    index = {r.code: i for i, r in enumerate(rules)}
    driver_rules = [_rule(r) for r in rules]
    driver_rules.append({
        "id": "PTL000", "name": "syntax-error",
        "shortDescription": {"text": "The file could not be parsed"},
        "defaultConfiguration": {"level": "error"},
    })
    index["PTL000"] = len(driver_rules) - 1
    results = []
    for f in findings:
        region = {
            "startLine": f.span.start.line,
            "startColumn": f.span.start.column + 1,
            "endLine": f.span.end.line,
            "endColumn": max(f.span.end.column + 1, 1),
        }
        level = driver_rules[index[f.code]]["defaultConfiguration"]["level"]
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": level,
            "message": {"text": f.message.replace("`", "'")},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": PurePath(f.path).as_posix()},
                    "region": region,
                }
            }],
        }
        if f.cell is not None:
            result["properties"] = {"cell": f.cell}
        results.append(result)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "ptlint",
                "version": __version__,
                "informationUri": "https://github.com/ptlint/ptlint",
                "rules": driver_rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"
