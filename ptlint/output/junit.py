"""JUnit XML, as CI systems read test reports (GitLab's `artifacts:reports:junit`,
Jenkins, Azure Pipelines): one test suite per file, one failing test case per
finding, in ruff's layout; a run without findings is one passing test case, and
each error of the run (an unreadable file, a rule that crashed) an erroring one."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Mapping, Sequence

from ptlint.model import Finding
from ptlint.output.where import in_cell


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    root = ET.Element("testsuites", name="ptlint", tests=str(len(findings) + len(errors) or 1),
                      failures=str(len(findings)), errors=str(len(errors)))
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    for path, found in by_path.items():
        suite = ET.SubElement(root, "testsuite", name=path, tests=str(len(found)), disabled="0",
                              errors="0", failures=str(len(found)), package="org.ptlint")
        for f in found:
            start = f.span.start
            case = ET.SubElement(suite, "testcase", name=f"org.ptlint.{f.code}", classname=path,
                                 line=str(start.line), column=str(start.column + 1))
            where = in_cell(f) or f"line {start.line}, col {start.column + 1}"
            failure = ET.SubElement(case, "failure", message=f"{f.code} {f.message}")
            failure.text = f"{where}, {f.code} {f.message}"
    if errors or not findings:
        suite = ET.SubElement(root, "testsuite", name="ptlint", tests=str(len(errors) or 1),
                              disabled="0", errors=str(len(errors)), failures="0",
                              package="org.ptlint")
        for line in errors:
            case = ET.SubElement(suite, "testcase", name="org.ptlint.error", classname="ptlint")
            ET.SubElement(case, "error", message=line).text = line
        if not errors:
            ET.SubElement(suite, "testcase", name="No errors found", classname="ptlint")
    ET.indent(root, space="    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
