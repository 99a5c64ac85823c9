"""Azure Pipelines logging commands (`##vso[task.logissue type=…;sourcepath=…]message`),
ruff's `azure` format, at SARIF's level; a notebook finding points at the line of
the `.ipynb` file, as in `github`."""
from __future__ import annotations

from typing import Mapping, Sequence

from ptlint.io.text import printable
from ptlint.model import Finding
from ptlint.output.where import file_lines, level, location


def _data(text: str) -> str:
    # the escapes of Azure's logging commands: `%AZP25` first, so that no other is doubled
    return printable(text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A"))


def _prop(text: str) -> str:
    return _data(text).replace(";", "%3B").replace("]", "%5D")


def render(findings: list[Finding], sources: Mapping[str, str], errors: Sequence[str] = ()) -> str:
    lines = []
    for f in findings:
        start, _ = file_lines(f, sources)
        props = [f"type={level(f.code)}", f"sourcepath={_prop(f.path)}", f"linenumber={start}"]
        if f.cell is None:  # a notebook cell's columns are not the file's
            props.append(f"columnnumber={f.span.start.column + 1}")
        props.append(f"code={f.code}")
        lines.append(f"##vso[task.logissue {';'.join(props)};]"
                     f"{_data(f'{location(f)}: {f.code} {f.message}')}")
    return "".join(line + "\n" for line in lines)
