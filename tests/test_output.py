"""Output formats through the command line: notebook positions in every format,
SARIF as code scanning reads it (valid against the SARIF 2.1.0 schema), CI paths
relative to the repository root, and file names that must not reach a terminal raw."""
from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pytest

from conftest import ptl102_fixes_notebooks_env, run_cli

# tests/data/sarif-schema-2.1.0.json: OASIS's SARIF 2.1.0 schema (errata 01), as published
# in github.com/oasis-tcs/sarif-spec (sarif-2.1/schema/sarif-schema-2.1.0.json @e058381).
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json")
                          .read_text(encoding="utf-8"))

TRAIN = """\
import torch
import torch.nn as nn


def restore(model, path):
    model = nn.DataParallel(model.cuda())
    return torch.load(path, weights_only=False)
"""


def _code(*lines: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": list(lines)}


NOTEBOOK = {
    "nbformat": 4, "nbformat_minor": 5, "metadata": {"language_info": {"name": "python"}},
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        _code("import torch\n", "import torch.nn as nn\n"),
        {"cell_type": "raw", "metadata": {}, "source": ["notes\n"]},
        _code("m = nn.Linear(2, 2)\n", "model = nn.DataParallel(m)\n", "print(model)"),
    ],
}


def _write_notebook(path: Path, data: dict = NOTEBOOK) -> str:
    text = json.dumps(data, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


def _line_of(text: str, needle: str) -> int:
    """The 1-based line of `text` that contains `needle` (exactly one does)."""
    [number] = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return number


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository: `.git` at the root, the code one folder down."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


def _sarif(*args: str, cwd: Path) -> dict:
    proc = run_cli(*args, "--no-cache", "--output-format", "sarif", cwd=cwd)
    log = json.loads(proc.stdout)
    jsonschema.validate(log, SARIF_SCHEMA)  # whatever else the test checks, the log is valid
    return log


# -- notebook cells, numbered as ruff numbers them ----------------------------------------
def test_notebook_cells_are_numbered_from_one_counting_every_cell(tmp_path):
    _write_notebook(tmp_path / "nb.ipynb")
    # the finding is in the fourth cell (index 3; a markdown and a raw cell come before it)
    concise = run_cli("nb.ipynb", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert "nb.ipynb:cell 4:2:9: PTL102 " in concise.stdout, concise.stdout
    full = run_cli("nb.ipynb", "--no-cache", cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"})
    assert "nb.ipynb:cell 4:2:9: PTL102 " in full.stdout
    [finding] = json.loads(run_cli("nb.ipynb", "--no-cache", "--output-format", "json",
                                   cwd=tmp_path).stdout)
    assert (finding["cell"], finding["line"], finding["column"]) == (4, 2, 9)
    diff = run_cli("nb.ipynb", "--no-cache", "--diff", "--unsafe-fixes", cwd=tmp_path,
                   env=ptl102_fixes_notebooks_env())
    assert "--- a/nb.ipynb:cell 2\n" in diff.stdout  # the import goes to the first code cell
    assert "--- a/nb.ipynb:cell 4\n+++ b/nb.ipynb:cell 4\n" in diff.stdout


def test_ci_formats_point_at_the_line_of_the_ipynb_file(tmp_path):
    text = _write_notebook(tmp_path / "nb.ipynb")
    line = _line_of(text, "model = nn.DataParallel(m)")
    assert line > 20  # far from the top of the JSON file, where a naive position would land

    github = run_cli("nb.ipynb", "--no-cache", "--output-format", "github", cwd=tmp_path).stdout
    assert github == (f"::warning title=ptlint (PTL102),file=nb.ipynb,line={line},endLine={line}::"
                      "nb.ipynb:cell 4:2:9: PTL102 `DataParallel` is slower than "
                      "`DistributedDataParallel`, even on one machine\n")

    [gitlab] = json.loads(run_cli("nb.ipynb", "--no-cache", "--output-format", "gitlab",
                                  cwd=tmp_path).stdout)
    assert gitlab["location"] == {"path": "nb.ipynb", "lines": {"begin": line, "end": line}}
    assert gitlab["description"].endswith("(cell 4, line 2, column 9)")

    [result] = _sarif("nb.ipynb", cwd=tmp_path)["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["region"] == {"startLine": line, "endLine": line}
    assert result["message"]["text"].endswith("(cell 4, line 2, column 9)")
    assert result["properties"] == {"cell": 4, "cellLine": 2, "cellColumn": 9}


# -- the formats CI systems and editors made for other tools read ------------------------
def test_junit_report_one_failing_case_per_finding_and_errors_as_errors(repo):
    import xml.etree.ElementTree as ET

    proc = run_cli("src", "missing.py", "--no-cache", "--output-format", "junit", cwd=repo)
    assert proc.returncode == 2
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites" and root.get("name") == "ptlint"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "2", "1")
    [suite, errors] = root.findall("testsuite")
    assert suite.get("name") == os.path.join("src", "train.py") and suite.get("failures") == "2"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["org.ptlint.PTL102", "org.ptlint.PTL301"]
    assert (cases[0].get("line"), cases[0].get("column")) == ("6", "13")
    failure = cases[0].find("failure")
    assert failure.get("message").startswith("PTL102 `DataParallel` is slower")
    assert failure.text.startswith("line 6, col 13, PTL102 ")
    [error] = errors.findall("testcase/error")
    assert error.get("message") == "missing.py: no such file or directory"

    clean = ET.fromstring(run_cli("src", "--no-cache", "--output-format", "junit",
                                  "--select", "PTL001", cwd=repo).stdout)
    [case] = clean.findall("testsuite/testcase")
    assert case.get("name") == "No errors found" and list(case) == []
    assert (clean.get("tests"), clean.get("failures"), clean.get("errors")) == ("1", "0", "0")


def test_json_lines_and_pylint_formats(tmp_path):
    _write_notebook(tmp_path / "nb.ipynb")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    args = ("train.py", "nb.ipynb", "--no-cache")
    whole = json.loads(run_cli(*args, "--output-format", "json", cwd=tmp_path).stdout)
    lines = run_cli(*args, "--output-format", "json-lines", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(line) for line in lines] == whole and len(whole) == 3
    pylint = run_cli(*args, "--output-format", "pylint", cwd=tmp_path)
    assert pylint.returncode == 1
    slower = "`DataParallel` is slower than `DistributedDataParallel`, even on one machine"
    assert pylint.stdout.splitlines() == [
        f"train.py:6: [PTL102] {slower}",
        "train.py:7: [PTL301] " + whole[1]["message"],
        f"nb.ipynb:cell 4:2: [PTL102] {slower}",
    ]

def test_grouped_format(tmp_path):
    _write_notebook(tmp_path / "nb.ipynb")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    out = run_cli("train.py", "nb.ipynb", "--no-cache", "--output-format", "grouped",
                  cwd=tmp_path)
    assert out.returncode == 1
    whole = json.loads(run_cli("train.py", "nb.ipynb", "--no-cache", "--output-format", "json",
                               cwd=tmp_path).stdout)
    slower = "`DataParallel` is slower than `DistributedDataParallel`, even on one machine"
    # each file once, its findings indented with the positions padded to one width
    assert out.stdout.splitlines()[:8] == [
        "train.py:",
        f"  6:13 PTL102 {slower}",
        f"  7:12 PTL301 {whole[1]['message']}",
        "",
        "nb.ipynb:",
        f"  cell 4:2:9 PTL102 {slower}",
        "",
        "Found 3 findings.",
    ]
    # positions of different widths line up
    (tmp_path / "moved.py").write_text("import torch\n" + "\n" * 8 + "x = torch.zeros(3).cuda()\n"
                                       "y = torch.ones(2).cuda()\n", encoding="utf-8")
    moved = run_cli("moved.py", "--no-cache", "--output-format", "grouped", cwd=tmp_path)
    created = "Tensor created on the CPU and then moved; pass `device=` to the factory instead"
    assert moved.stdout.splitlines()[:4] == [
        "moved.py:", f"  10:5 PTL101 {created}", f"  11:5 PTL101 {created}", ""]


def test_a_source_kept_as_one_string_points_at_that_string(tmp_path):
    data = json.loads(json.dumps(NOTEBOOK))
    data["cells"][3]["source"] = "".join(data["cells"][3]["source"])
    text = _write_notebook(tmp_path / "nb.ipynb", data)
    line = _line_of(text, "model = nn.DataParallel(m)")
    github = run_cli("nb.ipynb", "--no-cache", "--output-format", "github", cwd=tmp_path).stdout
    assert f",line={line},endLine={line}::nb.ipynb:cell 4:2:9: PTL102" in github


# -- SARIF for code scanning -------------------------------------------------------------------
def test_sarif_security_rules_have_a_security_severity(repo):
    log = _sarif("src", cwd=repo)
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    for code in ("PTL301", "PTL331"):
        properties = rules[code]["properties"]
        assert "security" in properties["tags"]  # GitHub reads security-severity only then
        assert 0.0 < float(properties["security-severity"]) <= 10.0
    assert "security-severity" not in rules["PTL102"]["properties"]
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"PTL102", "PTL301"}


def test_run_errors_are_tool_execution_notifications(repo):
    proc = run_cli("src", "missing.py", "--no-cache", "--output-format", "sarif", cwd=repo)
    assert proc.returncode == 2
    log = json.loads(proc.stdout)
    jsonschema.validate(log, SARIF_SCHEMA)
    [invocation] = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    assert note["message"]["text"] == "missing.py: no such file or directory"
    assert "error: missing.py: no such file or directory" in proc.stderr  # still said there too
    assert len(log["runs"][0]["results"]) == 2  # the other files' findings are kept

    clean = _sarif("src", cwd=repo)
    assert clean["runs"][0]["invocations"] == [
        {"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_ci_paths_are_relative_to_the_repository_root(repo):
    """Also when ptlint runs in a subfolder, or is given absolute paths."""
    for cwd, path in ((repo, "src"), (repo / "src", "."), (repo, str(repo / "src")),
                      (repo / "src", str(repo / "src" / "train.py"))):
        log = _sarif(path, cwd=cwd)
        run = log["runs"][0]
        assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": repo.as_uri() + "/"}}
        for result in run["results"]:
            artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
            assert artifact == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}, (cwd, path)
        gitlab = json.loads(run_cli(path, "--no-cache", "--output-format", "gitlab",
                                    cwd=cwd).stdout)
        assert {g["location"]["path"] for g in gitlab} == {"src/train.py"}, (cwd, path)


def test_a_file_outside_the_repository_gets_an_absolute_uri(repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "x.py"
    outside.write_text(TRAIN, encoding="utf-8")
    log = _sarif(str(outside), cwd=repo)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in log["runs"][0]["results"]}
    assert uris == {outside.as_uri()}


def test_sarif_uris_are_encoded_and_columns_declared(tmp_path):
    names = ["hash#q?.py", "co:lon.py", "per%25cent.py", "sp ace.py", "caf\u00e9.py"]
    for name in names:
        (tmp_path / name).write_text(TRAIN, encoding="utf-8")
    log = _sarif(".", cwd=tmp_path)
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in run["results"]}
    assert uris == {"hash%23q%3F.py", "co%3Alon.py", "per%2525cent.py", "sp%20ace.py",
                    "caf%C3%A9.py"}
    assert {unquote(u) for u in uris} == set(names)


def test_github_annotations_use_the_sarif_level(repo):
    (repo / "src" / "broken.py").write_text("def (:\n", encoding="utf-8")
    github = run_cli("src", "--no-cache", "--output-format", "github", cwd=repo).stdout
    levels = {line.split(" ", 1)[0]: line for line in github.splitlines()}
    log = _sarif("src", cwd=repo)
    sarif = {r["ruleId"]: r["level"] for r in log["runs"][0]["results"]}
    assert sarif == {"PTL000": "error", "PTL102": "warning", "PTL301": "warning"}
    for line in github.splitlines():
        code = line.split("(", 1)[1].split(")", 1)[0]
        assert line.startswith(f"::{sarif[code]} "), line
    assert set(levels) == {"::error", "::warning"}



def test_azure_logging_commands_and_reviewdog_diagnostics(tmp_path):
    """ruff's `azure` and `rdjson`: a command per finding, at the level SARIF gives it,
    its properties escaped; reviewdog gets ranges and only the fixes it can apply."""
    (tmp_path / "a;b]%.py").write_text(TRAIN + "x = torch.zeros(3).cuda()\n", encoding="utf-8")
    text = _write_notebook(tmp_path / "nb.ipynb")
    line = _line_of(text, "model = nn.DataParallel(m)")
    args = ("a;b]%.py", "nb.ipynb", "--no-cache", "--output-format")
    azure = run_cli(*args, "azure", cwd=tmp_path)
    assert azure.returncode == 1
    slower = "`DataParallel` is slower than `DistributedDataParallel`, even on one machine"
    [dp, load, moved, cell] = azure.stdout.splitlines()
    assert dp == ("##vso[task.logissue type=warning;sourcepath=a%3Bb%5D%AZP25.py;linenumber=6;"
                  f"columnnumber=13;code=PTL102;]a;b]%AZP25.py:6:13: PTL102 {slower}")
    assert load.startswith("##vso[task.logissue type=warning;") and ";code=PTL301;]" in load
    assert moved.startswith("##vso[task.logissue type=warning;sourcepath=a%3Bb%5D%AZP25.py;"
                            "linenumber=8;columnnumber=5;code=PTL101;]")
    assert cell == ("##vso[task.logissue type=warning;sourcepath=nb.ipynb;"
                    f"linenumber={line};code=PTL102;]nb.ipynb:cell 4:2:9: PTL102 {slower}")

    report = json.loads(run_cli(*args, "rdjson", cwd=tmp_path).stdout)
    assert report["source"] == {"name": "ptlint"}
    found = {(d["code"]["value"], d["location"]["path"]): d for d in report["diagnostics"]}
    assert len(found) == 4
    parallel = found["PTL102", "a;b]%.py"]
    assert parallel["location"]["range"] == {"start": {"line": 6, "column": 13},
                                             "end": {"line": 6, "column": 42}}
    assert "suggestions" not in parallel  # unsafe, and it adds an import
    [suggestion] = found["PTL101", "a;b]%.py"]["suggestions"]
    assert suggestion["text"] == 'torch.zeros(3, device="cuda")'
    assert suggestion["range"] == {"start": {"line": 8, "column": 5},
                                   "end": {"line": 8, "column": 26}}
    notebook = found["PTL102", "nb.ipynb"]
    assert notebook["location"]["range"] == {"start": {"line": line}, "end": {"line": line}}
    assert notebook["message"] == f"{slower} (cell 4, line 2, column 9)"
    assert "suggestions" not in notebook


# -- what reaches the terminal -----------------------------------------------------------------
def test_control_characters_in_file_names_are_escaped(tmp_path):
    name = "red\x1b[31malert\x07.py"
    (tmp_path / name).write_text(TRAIN, encoding="utf-8")
    (tmp_path / "bad\x1b]0;title\x07.ipynb").write_text("{not json", encoding="utf-8")
    shown = "red\\x1b[31malert\\x07.py"
    for fmt in ("full", "concise", "github"):
        proc = run_cli(".", "--no-cache", "--output-format", fmt, cwd=tmp_path,
                       env={**os.environ, "NO_COLOR": "1"})
        assert proc.returncode == 2, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, fmt
        assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, fmt
        assert f"{shown}:6:13: PTL102" in proc.stdout, (fmt, proc.stdout)
        assert "error: bad\\x1b]0;title\\x07.ipynb: invalid notebook" in proc.stderr
    # a diff quotes the name the way git does, which `git apply` reads back
    diff = run_cli(name, "--no-cache", "--diff", "--unsafe-fixes", cwd=tmp_path)
    assert '--- "a/red\\033[31malert\\a.py"\n+++ "b/red\\033[31malert\\a.py"\n' in diff.stdout
    assert "\x1b" not in diff.stdout + diff.stderr
    # the machine formats keep the real name (JSON escapes it)
    found = json.loads(run_cli(".", "--no-cache", "--output-format", "json", cwd=tmp_path).stdout)
    assert {f["path"] for f in found} == {name}
