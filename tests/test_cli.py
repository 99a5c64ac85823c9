"""The command line, end to end, as a user runs it (a subprocess per call)."""
from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, pool_padding
from ptlint.config import OUTPUT_FORMATS

BAD = """\
import torch.nn as nn


def wrap(model):
    model = nn.DataParallel(model.cuda())
    return model
"""
CLEAN = "import torch\n\nx = torch.zeros(3)\n"
FIXED_LINE = ("    model = DistributedDataParallel(model.cuda()) if torch.distributed.is_available() "
              "and torch.distributed.is_initialized() else nn.DataParallel(model.cuda())")


def finding_lines(stdout: str) -> list[str]:
    return [l for l in stdout.splitlines() if re.match(r"^\S+:\d+:\d+: PTL\d{3} ", l)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "src" / "ok.py").write_text(CLEAN)
    return tmp_path


def test_check_is_the_default_command(cli, project):
    a = cli("src", cwd=project)
    b = cli("check", "src", cwd=project)
    assert a.returncode == b.returncode == 1
    assert a.stdout == b.stdout
    assert "src/train.py:5:13: PTL102" in a.stdout


def test_exit_codes(cli, project):
    assert cli("src/ok.py", cwd=project).returncode == 0
    assert cli("src/train.py", cwd=project).returncode == 1
    assert cli("src/train.py", "--exit-zero", cwd=project).returncode == 0
    missing = cli("nope/", cwd=project)
    assert missing.returncode == 2
    assert "nope/: no such file or directory" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_version(cli):
    from ptlint import __version__

    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"ptlint {__version__}"


def test_walk_skips_gitignored_and_usual_folders(cli, project):
    for folder in (".venv", "build", "node_modules", "__pycache__", "generated"):
        (project / folder).mkdir()
        (project / folder / "bad.py").write_text(BAD)
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n*.skip.py\n")
    (project / "src" / "x.skip.py").write_text(BAD)
    out = cli(".", "--output-format", "concise", cwd=project)
    assert [l.split(":")[0] for l in finding_lines(out.stdout)] == ["src/train.py"]
    # --no-respect-gitignore lints what .gitignore ignores, and wins over the configuration
    (project / "pyproject.toml").write_text("[tool.ptlint]\nrespect-gitignore = true\n")
    every = cli(".", "--output-format", "concise", "--no-respect-gitignore", cwd=project)
    assert sorted(l.split(":")[0] for l in finding_lines(every.stdout)) == [
        "generated/bad.py", "src/train.py", "src/x.skip.py"]
    (project / "pyproject.toml").write_text("[tool.ptlint]\nrespect-gitignore = false\n")
    assert cli(".", "--show-files", "--respect-gitignore", cwd=project).stdout.split() == [
        "src/ok.py", "src/train.py"]


def test_walk_reads_each_folders_gitignore_and_looks_for_git_once_per_folder(tmp_path,
                                                                             monkeypatch):
    from conftest import settings_for
    from ptlint.io.files import discover

    deep = tmp_path / "repo" / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "repo" / ".gitignore").write_text("skip_me.py\n")
    (tmp_path / "repo" / "a" / "b" / ".gitignore").write_text("c/d/generated.py\n")
    for name in ("x.py", "skip_me.py", "generated.py"):
        (deep / name).write_text(BAD)
    looked_at: list[Path] = []
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: (
        self.name != ".git" or not looked_at.append(self.parent)) and exists(self))
    # (a torch version given: the project's requirements are not looked for)
    found = discover([str(tmp_path / "repo")], settings_for(
        "PTL102", root=tmp_path, torch_version_explicit=True))
    assert [p.name for p in found.files] == ["x.py"]
    assert len(looked_at) == len({*looked_at}) == 5  # repo, a, b, c, d


def test_exclude_and_extend_exclude(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nextend-exclude = ["src/train.py"]\n')
    assert cli(".", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.ptlint]\n')
    assert cli(".", "--extend-exclude", "src", cwd=project).returncode == 0
    # a file named on the command line is always linted
    assert cli("src/train.py", "--extend-exclude", "src", cwd=project).returncode == 1


def test_fix_applies_only_safe_fixes_by_default(cli, project):
    out = cli("src", "--fix", cwd=project)
    assert (project / "src/train.py").read_text() == BAD  # PTL102's fix is unsafe
    assert out.returncode == 1
    assert "Fixed 0 findings, 1 remaining." in out.stdout
    assert "1 more fixable with `--fix --unsafe-fixes`" in out.stdout


def test_fix_unsafe(cli, project):
    out = cli("src", "--fix", "--unsafe-fixes", cwd=project)
    text = (project / "src/train.py").read_text()
    assert FIXED_LINE in text
    assert "from torch.nn.parallel import DistributedDataParallel" in text
    assert out.returncode == 0
    assert "Fixed 1 finding, 0 remaining." in out.stdout
    again = cli("src", "--fix", "--unsafe-fixes", cwd=project)
    assert (project / "src/train.py").read_text() == text
    assert again.returncode == 0


def test_config_can_make_a_fix_safe(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nextend-safe-fixes = ["PTL102"]\n')
    assert cli("src", "--fix", cwd=project).returncode == 0
    assert FIXED_LINE in (project / "src/train.py").read_text()


def test_unsafe_fixes_from_config_and_unfixable(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nunsafe-fixes = true\nunfixable = ["PTL1"]\n')
    cli("src", "--fix", cwd=project)
    assert (project / "src/train.py").read_text() == BAD
    (project / "pyproject.toml").write_text('[tool.ptlint]\nunsafe-fixes = true\nfixable = ["PTL102"]\n')
    cli("src", "--fix", cwd=project)
    assert FIXED_LINE in (project / "src/train.py").read_text()


def test_diff_changes_nothing(cli, project):
    out = cli("src", "--diff", "--unsafe-fixes", cwd=project)
    assert out.returncode == 1
    assert (project / "src/train.py").read_text() == BAD
    assert "--- a/src/train.py" in out.stdout and "+++ b/src/train.py" in out.stdout
    assert "+" + FIXED_LINE in out.stdout
    assert "-    model = nn.DataParallel(model.cuda())" in out.stdout
    assert cli("src/ok.py", "--diff", cwd=project).returncode == 0
    # without --unsafe-fixes there is nothing safe to apply
    assert cli("src", "--diff", cwd=project).returncode == 0


@pytest.mark.parametrize("flags, code", [
    (["--select", "PTL102"], 1), (["--select", "PTL1"], 1), (["--select", "ALL"], 1),
    (["--select", "PTL0"], 0), (["--ignore", "PTL102"], 0), (["--ignore", "PTL1"], 0),
    (["--select", "PTL0", "--extend-select", "PTL102"], 1),
    (["--select", "data-parallel"], 1),
])
def test_select_ignore(cli, project, flags, code):
    assert cli("src", *flags, cwd=project).returncode == code


def test_unknown_selector_is_an_error(cli, project):
    out = cli("src", "--select", "PTL999", cwd=project)
    assert out.returncode == 2
    assert "unknown rule selector 'PTL999'" in out.stderr


def test_statistics(cli, project):
    (project / "src" / "more.py").write_text(BAD + "\nother = nn.DataParallel(model)\n")
    (project / "src" / "moved.py").write_text(
        "import torch\n\na = torch.zeros(3).cuda()\nb = torch.ones(2).cuda()\n")
    out = cli("src", "--statistics", cwd=project)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "3\tPTL102\t[ ] data-parallel",
        "2\tPTL101\t[*] tensor-moved-after-creation",
        "Found 5 findings.",
        "[*] 2 fixable with `ptlint --fix`.",
        "2 more fixable with `--fix --unsafe-fixes`.",  # `other` wraps a model not on its device
    ]
    js = cli("src", "--statistics", "--output-format", "json", cwd=project)
    assert json.loads(js.stdout) == [
        {"code": "PTL102", "name": "data-parallel", "count": 3, "fixable": False,
         "fixable_count": 0},
        {"code": "PTL101", "name": "tensor-moved-after-creation", "count": 2, "fixable": True,
         "fixable_count": 2},
    ]
    unsafe = json.loads(cli("src", "--statistics", "--output-format", "json", "--unsafe-fixes",
                            cwd=project).stdout)
    assert [row["fixable_count"] for row in unsafe] == [2, 2]


def test_concise_format(cli, project):
    out = cli("src/train.py", "--output-format", "concise", cwd=project)
    assert finding_lines(out.stdout) == [(
        "src/train.py:5:13: PTL102 `DataParallel` is slower than `DistributedDataParallel`, "
        "even on one machine")]


def test_full_format_without_colour_when_piped(cli, project):
    out = cli("src/train.py", cwd=project)
    assert "\x1b[" not in out.stdout
    assert "5 |     model = nn.DataParallel(model.cuda())" in out.stdout
    assert "^" * 29 in out.stdout
    assert "help (unsafe fix): Use `DistributedDataParallel` when a process group" in out.stdout


def test_full_format_colour_respects_no_color(cli, project):
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    assert "\x1b[" in cli("src/train.py", cwd=project, env=env).stdout
    env["NO_COLOR"] = "1"  # bold may stay; colours go
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", cli("src/train.py", cwd=project, env=env).stdout)


def test_json_format(cli, project):
    out = cli("src/train.py", "--output-format", "json", cwd=project)
    [item] = json.loads(out.stdout)
    assert item["code"] == "PTL102" and item["name"] == "data-parallel"
    assert item["path"] == "src/train.py"
    assert (item["line"], item["column"], item["end_line"], item["end_column"]) == (5, 13, 5, 42)
    assert item["url"] is None  # as ruff, for a rule without a documentation page online
    fix = item["fix"]
    assert fix["applicability"] == "unsafe" and fix["message"].startswith(
        "Use `DistributedDataParallel`")
    [edit] = fix["edits"]
    assert edit["location"] == {"line": 5, "column": 13}
    assert edit["end_location"] == {"line": 5, "column": 42}
    assert edit["content"].startswith("DistributedDataParallel(model.cuda()) if")
    assert json.loads(cli("src/ok.py", "--output-format", "json", cwd=project).stdout) == []


def test_json_positions_match_concise(cli, project):
    js = json.loads(cli("src", "--output-format", "json", cwd=project).stdout)
    concise = finding_lines(cli("src", "--output-format", "concise", cwd=project).stdout)
    assert [f"{i['path']}:{i['line']}:{i['column']}: {i['code']} {i['message']}" for i in js] == concise


def test_sarif_has_what_github_code_scanning_needs(cli, project):
    out = cli("src", "--output-format", "sarif", cwd=project)
    log = json.loads(out.stdout)
    assert log["version"] == "2.1.0" and "$schema" in log
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "ptlint"
    rule_ids = [r["id"] for r in driver["rules"]]
    from ptlint.rule import registry

    assert set(registry()) <= set(rule_ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"]
        assert rule["help"]["text"]  # the rule's whole documentation: no page to link to
        assert "helpUri" not in rule
    assert "informationUri" not in driver
    [result] = run["results"]
    assert result["ruleId"] == "PTL102"
    assert driver["rules"][result["ruleIndex"]]["id"] == "PTL102"
    assert result["level"] in ("error", "warning", "note")
    assert result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/train.py"
    assert location["region"] == {"startLine": 5, "startColumn": 13, "endLine": 5, "endColumn": 42}


def test_github_format(cli, project):
    out = cli("src/train.py", "--output-format", "github", cwd=project)
    assert out.stdout.startswith(
        "::warning title=ptlint (PTL102),file=src/train.py,line=5,col=13,endColumn=42,endLine=5::"
        "src/train.py:5:13: PTL102 ")


def test_gitlab_fingerprint_ignores_line_numbers(cli, project):
    first = json.loads(cli("src/train.py", "--output-format", "gitlab", cwd=project).stdout)
    (project / "src/train.py").write_text("\n\n" + BAD)
    second = json.loads(cli("src/train.py", "--output-format", "gitlab", cwd=project).stdout)
    assert first[0]["fingerprint"] == second[0]["fingerprint"]
    assert first[0]["location"]["lines"]["begin"] + 2 == second[0]["location"]["lines"]["begin"]
    assert first[0]["check_name"] == "PTL102"


def test_nothing_emitted_points_at_a_page_that_does_not_exist(cli):
    """No project website or repository is published: no output format, nor
    `ptlint rules`, links to one. The only links are the SARIF schema and the
    references the rules' documentation cites."""
    from ptlint.rule import registry

    cited = {url for rule in registry().values()
             for url in re.findall(r"https?://[^\s)\"]+", rule.documentation())}
    allowed = cited | {"https://json.schemastore.org/sarif-2.1.0.json"}
    outputs = [cli("fixtures/", "--no-cache", "--exit-zero", "--output-format", fmt, cwd=ROOT)
               for fmt in OUTPUT_FORMATS]
    outputs += [cli("rules"), cli("rules", "--output-format", "json"), cli("rule", "PTL001")]
    for out in outputs:
        assert out.returncode == 0, out.stderr
        links = set(re.findall(r"https?://[^\s)\"]+", out.stdout + out.stderr))
        assert links <= allowed, (out.args, links - allowed)
    as_json = outputs[OUTPUT_FORMATS.index("json")]
    assert all(item["url"] is None for item in json.loads(as_json.stdout))
    assert all(item["url"] is None for item in json.loads(outputs[-2].stdout))


@pytest.mark.parametrize("columns", [80, 200])
def test_rules_fit_the_terminal(cli, columns):
    """Every rule's code, name, fix, default and description, whole, in lines no
    wider than the terminal."""
    from ptlint.docs import fix_label
    from ptlint.rule import registry

    out = cli("rules", env={**os.environ, "COLUMNS": str(columns)})
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert lines[0].split() == ["code", "name", "fix", "default"] + (["finds"] if columns > 100
                                                                      else [])
    text = " ".join(out.stdout.split())
    for rule in registry().values():
        default = "on" if rule.default_enabled else "off"
        assert f"{rule.code} {rule.name} {fix_label(rule)} {default} " in text + " "
        assert " ".join(rule.description().replace("`", "").split()) in text


def test_rules_and_rule(cli):
    rules = cli("rules")
    assert rules.returncode == 0 and "PTL102" in rules.stdout and "data-parallel" in rules.stdout
    listed = json.loads(cli("rules", "--output-format", "json").stdout)
    assert {"code": "PTL102", "name": "data-parallel"}.items() <= listed[[r["code"] for r in listed].index("PTL102")].items()
    doc = cli("rule", "PTL102")
    assert doc.returncode == 0
    assert "## Why is this bad?" in doc.stdout and "Fix: unsafe." in doc.stdout
    assert cli("rule", "data-parallel").stdout == doc.stdout
    bad = cli("rule", "PTL998")
    assert bad.returncode == 2 and "unknown rule" in bad.stderr
    # the code a syntax error is reported under is explained too
    syntax = cli("rule", "PTL000")
    assert syntax.returncode == 0 and syntax.stdout.startswith("# syntax-error (PTL000)")
    assert "non_blocking" in syntax.stdout and cli("rule", "syntax-error").stdout == syntax.stdout
    assert json.loads(cli("rule", "PTL000", "--output-format", "json").stdout)["code"] == "PTL000"


def test_rule_all_and_json_as_ruff_rule(cli):
    every = cli("rule", "--all")
    assert every.returncode == 0
    assert cli("rule", "PTL102").stdout.strip() in every.stdout
    listed = json.loads(cli("rules", "--output-format", "json").stdout)
    assert every.stdout.count("## Why is this bad?") == len(listed)
    docs = json.loads(cli("rule", "--all", "--output-format", "json").stdout)
    assert [d["code"] for d in docs] == [r["code"] for r in listed]
    one = json.loads(cli("rule", "data-parallel", "--output-format", "json").stdout)
    assert one["code"] == "PTL102" and one["fix"] == "unsafe" and one["default"] is True
    assert one["explanation"].strip() == cli("rule", "PTL102").stdout.strip()
    for argv in (["rule"], ["rule", "PTL102", "--all"]):
        wrong = cli(*argv)
        assert wrong.returncode == 2 and "name one rule, or --all" in wrong.stderr


def test_config_discovered_by_walking_up(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nignore = ["PTL102"]\n')
    assert cli("train.py", cwd=project / "src").returncode == 0
    assert cli(str(project / "src"), cwd="/").returncode == 0


def test_ptlint_toml_and_config_flag(cli, project):
    (project / "ptlint.toml").write_text('ignore = ["PTL102"]\n')
    assert cli("src", cwd=project).returncode == 0
    other = project / "other.toml"
    other.write_text('[tool.ptlint]\nselect = ["PTL102"]\n')
    other.rename(project / "pyproject-alt.toml")
    (project / "alt").mkdir()
    (project / "alt" / "pyproject.toml").write_text('[tool.ptlint]\nselect = ["PTL102"]\n')
    assert cli("src", "--config", "alt/pyproject.toml", cwd=project).returncode == 1


def test_cli_overrides_config(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nselect = ["PTL102"]\noutput-format = "json"\n')
    assert json.loads(cli("src", cwd=project).stdout)[0]["code"] == "PTL102"
    assert cli("src", "--output-format", "concise", cwd=project).stdout.startswith("src/train.py:5:13")
    assert cli("src", "--ignore", "PTL102", cwd=project).returncode == 0


@pytest.mark.parametrize("content, message", [
    ('[tool.ptlint]\nslect = ["PTL102"]\n', "unknown key 'slect'"),
    ('[tool.ptlint]\nselect = ["PTL9"]\n', "unknown rule selector 'PTL9'"),
    ('[tool.ptlint]\nselect = "PTL102"\n', "expected a list of strings"),
    ('[tool.ptlint]\noutput-format = "xml"\n', "unknown output format 'xml'"),
    ('[tool.ptlint]\nper-file-ignores = {"x.py" = ["NOPE1"]}\n', "unknown rule selector 'NOPE1'"),
    ('[tool.ptlint\n', "invalid TOML"),
])
def test_bad_config_is_a_clear_error(cli, project, content, message):
    (project / "pyproject.toml").write_text(content)
    out = cli("src", cwd=project)
    assert out.returncode == 2
    assert message in out.stderr and "pyproject.toml" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_missing_config_file(cli, project):
    out = cli("src", "--config", "nope.toml", cwd=project)
    assert out.returncode == 2 and "nope.toml" in out.stderr


def test_per_file_ignores(cli, project):
    (project / "pyproject.toml").write_text(
        '[tool.ptlint]\n[tool.ptlint.per-file-ignores]\n"src/train.py" = ["PTL102"]\n')
    assert cli("src", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text(
        '[tool.ptlint]\n[tool.ptlint.per-file-ignores]\n"tests/**" = ["PTL1"]\n')
    assert cli("src", cwd=project).returncode == 1


@pytest.mark.parametrize("comment, silent", [
    ("  # noqa: PTL102", True), ("  # noqa", True), ("  # NOQA:PTL102,PTL001", True),
    ("  # noqa: PTL001", False), ("  # noqa: E501", False),
])
def test_noqa(cli, project, comment, silent):
    (project / "src/train.py").write_text(BAD.replace("cuda())\n    return", f"cuda()){comment}\n    return"))
    assert cli("src/train.py", cwd=project).returncode == (0 if silent else 1)


def test_file_level_noqa(cli, project):
    (project / "src/train.py").write_text("# ptlint: noqa\n" + BAD)
    assert cli("src/train.py", cwd=project).returncode == 0
    (project / "src/train.py").write_text("# ptlint: noqa: PTL102\n" + BAD)
    assert cli("src/train.py", cwd=project).returncode == 0


def test_syntax_error_is_reported_and_the_run_goes_on(cli, project):
    (project / "src" / "broken.py").write_text("def f(:\n    pass\n")
    out = cli("src", "--output-format", "concise", cwd=project)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert "src/broken.py:1:7: PTL000 SyntaxError: invalid syntax" in lines
    assert any(l.startswith("src/train.py:5:13: PTL102") for l in lines)
    assert cli("src", "--ignore", "PTL000", "--output-format", "concise", cwd=project).stdout.count("PTL000") == 0


OLD_MOVES = ("import torch\n\n\ndef train(loader, model):\n"
             "    net = torch.nn.DataParallel(model)\n"
             "    for x, y in loader:\n"
             "        x = x.cuda(async=True)\n"
             "        y = y.to('cuda',\n                 async=True)\n"
             "        x.copy_(y, async=True)\n")


def test_async_argument_of_old_torch_is_fixed_and_the_file_then_linted(cli, project):
    """`.cuda(async=True)` is a syntax error since Python 3.7: PTL000 says torch
    renamed the argument, and its fix renames every one so that the rules see the file."""
    path = project / "src" / "old.py"
    path.write_text(OLD_MOVES)
    out = cli("src/old.py", "--output-format", "concise", cwd=project)
    assert out.stdout.splitlines()[0] == (
        "src/old.py:7:20: PTL000 SyntaxError: `async` is a keyword since Python 3.7; "
        "torch 0.4 renamed this argument `non_blocking`"), out.stdout
    assert "1 fixable" in out.stdout
    kept = cli("src/old.py", "--fix", "--config", 'unfixable = ["PTL000"]', cwd=project)
    assert kept.returncode == 1 and path.read_text() == OLD_MOVES
    fixed = cli("src/old.py", "--fix", "--output-format", "concise", cwd=project)
    assert path.read_text() == OLD_MOVES.replace("async=", "non_blocking=")
    assert [line.split()[1] for line in fixed.stdout.splitlines() if "src/old.py" in line] == [
        "PTL102"], fixed.stdout  # the file now parses: the rules ran on it
    # an `async=` of another call stays a plain syntax error, with no fix
    path.write_text(OLD_MOVES + "    launch(job, async=True)\n")
    plain = cli("src/old.py", "--fix", "--output-format", "concise", cwd=project)
    assert path.read_text() == OLD_MOVES + "    launch(job, async=True)\n"
    assert "PTL000 SyntaxError: `async` is a keyword" in plain.stdout
    assert "fixable" not in plain.stdout and "error:" not in plain.stderr, plain.stderr


def test_stdin(cli, project):
    out = cli("-", "--stdin-filename", "src/model.py", "--output-format", "concise", stdin=BAD, cwd=project)
    assert out.returncode == 1
    assert out.stdout.startswith("src/model.py:5:13: PTL102")
    anonymous = cli("-", "--output-format", "concise", stdin=BAD)
    assert anonymous.stdout.startswith("-:5:13: PTL102")
    fixed = cli("-", "--fix", "--unsafe-fixes", stdin=BAD)
    assert FIXED_LINE in fixed.stdout
    assert fixed.returncode == 0


def test_jobs_give_the_same_ordered_result(cli, project):
    for i in range(12):  # enough source for a pool of workers
        (project / "src" / f"m{i:02}.py").write_text(BAD + pool_padding(12))
    one = cli("src", "--jobs", "1", "--no-cache", "--output-format", "concise", cwd=project)
    two = cli("src", "--jobs", "2", "--no-cache", "--output-format", "concise", cwd=project)
    assert one.stdout == two.stdout and one.stdout.count("PTL102") == 13
    assert finding_lines(one.stdout) == sorted(finding_lines(one.stdout))


def test_cache_and_clean(cli, project):
    first = cli("src", "--output-format", "concise", cwd=project)
    cache = project / ".ptlint_cache"
    assert cache.is_dir() and (cache / ".gitignore").exists()
    entries = [p for p in cache.rglob("*") if p.is_file() and p.name != ".gitignore"]
    assert entries
    assert cli("src", "--output-format", "concise", cwd=project).stdout == first.stdout
    # a changed file is linted again, not served from the cache
    (project / "src/train.py").write_text(CLEAN)
    assert cli("src", cwd=project).returncode == 0
    assert cli("clean", cwd=project).returncode == 0
    assert not cache.exists()
    cli("src", "--no-cache", cwd=project)
    assert not cache.exists()


def test_cache_key_includes_the_settings(cli, project):
    assert cli("src", cwd=project).returncode == 1
    assert cli("src", "--ignore", "PTL102", cwd=project).returncode == 0
    assert cli("src", cwd=project).returncode == 1


def test_timings(cli, project):
    out = cli("src", "--timings", "--no-cache", cwd=project)
    assert "timings" in out.stderr and "parse" in out.stderr and "rule PTL102" in out.stderr


def test_force_exclude_applies_to_named_files(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nextend-exclude = ["src/train.py"]\n')
    assert cli("src/train.py", cwd=project).returncode == 1
    assert cli("src/train.py", "--force-exclude", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.ptlint]\nforce-exclude = true\nextend-exclude = ["src"]\n')
    assert cli("src/train.py", cwd=project).returncode == 0


def test_a_fully_cached_run_does_not_import_libcst_or_the_rules(cli, project):
    """Start-up is most of a warm run (pre-commit on a few files, CI on an
    unchanged tree): settings come from the generated catalog, and the engine,
    LibCST and the rules are imported only when a file must be linted."""
    import subprocess
    import sys

    assert cli("src", cwd=project).returncode == 1  # fills the cache
    probe = (
        "import sys\n"
        "from ptlint.cli import main\n"
        "code = main(['src', '--output-format', 'concise'])\n"
        "print(code, 'libcst' in sys.modules, any(m.startswith('ptlint.rules') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "1 False False", out.stdout + out.stderr
    assert "PTL102" in out.stdout
    (project / "src" / "ok.py").write_text(CLEAN + "y = 1\n")  # a changed file is linted
    out = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "1 True True", out.stdout + out.stderr
