"""The README's commands, run as written on a fresh machine: the quick start's
in a new virtualenv with a clone of this checkout, the pre-commit
configurations in a new repository, the CI steps (placeholders filled in)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEV_BIN = Path(sys.executable).parent  # this checkout's virtualenv: `ptlint` installed
URL, COMMIT = "<URL of a git repository holding ptlint>", "<full commit id>"


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def blocks(text: str, language: str = "") -> list[str]:
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
            if lang == language]


def commands(block: str) -> list[str]:
    return [line.split("  #")[0].strip() for line in block.splitlines()
            if line.strip() and not line.startswith("#")]


def placeholders(text: str) -> list[str]:
    return re.findall(r"<[A-Za-z][^<>\n]*>", text)


def project_with_findings(folder: Path) -> Path:
    """A project whose src/train.py has findings that all have safe fixes."""
    (folder / "src").mkdir(parents=True)
    shutil.copy(FIXTURES / "PTL110_log_of_one_plus" / "bad.py", folder / "src" / "train.py")
    return folder


def test_nothing_points_at_a_release_index_or_address_that_does_not_exist():
    assert "github.com/ptlint" not in README
    index = re.findall(r'pip install\s+"?ptlint(?!\s*@)', README)
    assert not index, "ptlint is on no package index: pip installs it from a clone or git"
    assert not re.search(r"^\s*rev:\s*v\d", README, re.M), "there is no release tag"
    # what is left to fill in is said to be so
    sections = [section(title) for title in ("Quick start", "pre-commit", "CI")]
    assert set(placeholders("".join(sections))) == {URL, COMMIT}


def test_quick_start_set_up_is_two_make_targets(user_machine):
    """`make test` is this suite, and `make demo` has its own test (test_demo.py):
    here make shows what each would run, in a clone."""
    set_up = blocks(section("Quick start"))[0]
    assert commands(set_up) == ["make demo", "make test"]
    for command in commands(set_up):
        proc = subprocess.run([*command.split(), "-n", "-o", ".venv/.installed"],
                              cwd=user_machine.clone, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


# what each command of the quick start must do: its exit status, and what it must show
QUICK_START = {
    "pip install ./ptlint": 0,
    'pip install "./ptlint[runtime]"': 0,
    'pip install "./ptlint[server]"': 0,
    "ptlint src/": 1,  # findings
    "ptlint src/ --fix": 0,  # all fixed
    "ptlint verify PTL001": 0,
}


def test_quick_start_commands_work_on_a_fresh_machine(user_machine):
    m = user_machine
    project = project_with_findings(m.work / "my-project")
    cwd = m.work
    block = blocks(section("Quick start"))[1]
    assert set(commands(block)) - {"cd my-project"} == set(QUICK_START), \
        "a command was added to or removed from the quick start: say here what it must do"
    for command in commands(block):
        if command.startswith("cd "):
            cwd = cwd / command.split()[1]
            continue
        proc = m.run(command, cwd)
        assert proc.returncode == QUICK_START[command], (command, proc.stdout, proc.stderr)
        if command == "ptlint src/":
            assert "src/train.py:11:19: PTL110" in proc.stdout
        elif command == "ptlint src/ --fix":
            assert "torch.log1p(x)" in (project / "src" / "train.py").read_text()
        elif command == "ptlint verify PTL001":
            assert "PTL001 loss-kept-with-graph: passed on cpu" in proc.stdout
        elif "[runtime]" in command:
            probe = m.run("python -c 'import torch; print(torch.__version__)'", cwd)
            assert probe.stdout.startswith("2."), probe.stderr
        elif "[server]" in command:
            probe = m.run("python -c 'import pygls, lsprotocol'", cwd)
            assert probe.returncode == 0, probe.stderr
    where = m.run("python -c 'import ptlint; print(ptlint.__file__)'", project).stdout
    assert where.startswith(str(m.venv)), "ptlint runs from the virtualenv, not the clone"


def test_quick_start_install_through_git_works(user_machine):
    """The other way to install: pip from the clone's git history, at a commit."""
    [command] = re.findall(r"`(pip install \"git\+[^`]*)`", section("Quick start"))
    m = user_machine
    m.run("pip uninstall -q -y ptlint", m.work)  # a machine without it
    proc = m.run(command, m.work)
    assert proc.returncode == 0, proc.stderr
    probe = m.run("python -c \"import importlib.metadata as m; "
                  "print(m.distribution('ptlint').read_text('direct_url.json'))\"", m.work)
    assert json.loads(probe.stdout)["vcs_info"]["commit_id"] == m.commit
    assert m.run("ptlint --version", m.work).returncode == 0


def _repository(folder: Path) -> dict[str, str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(folder.parent / "pre-commit-cache"),
           "PATH": f"{DEV_BIN}{os.pathsep}{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PIP_CONSTRAINT": str(ROOT / "constraints.txt")}
    project_with_findings(folder)
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    return env


def _pre_commit(config: str, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    (repo / ".pre-commit-config.yaml").write_text(config)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    return subprocess.run([str(DEV_BIN / "pre-commit"), "run", "--all-files"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)


def test_pre_commit_local_hook_works(tmp_path):
    """The `repo: local` hook, with ptlint installed (this checkout's virtualenv)."""
    local = blocks(section("pre-commit"), "yaml")[0]
    assert "repo: local" in local and not placeholders(local)
    repo = tmp_path / "repo"
    env = _repository(repo)
    proc = _pre_commit(local, repo, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "src/train.py:11:19: PTL110" in proc.stdout
    fixing = local.replace("entry: ptlint check --force-exclude",
                           "entry: ptlint check --fix --force-exclude")
    assert fixing != local
    _pre_commit(fixing, repo, env)
    assert "torch.log1p(x)" in (repo / "src" / "train.py").read_text()


def test_pre_commit_remote_hook_works_once_filled_in(user_machine, tmp_path):
    """The remote form, its two placeholders filled in with a clone and its commit:
    pre-commit installs ptlint from it into an environment of its own."""
    remote = blocks(section("pre-commit"), "yaml")[1]
    assert placeholders(remote) == [URL, COMMIT]
    config = remote.replace(URL, f"file://{user_machine.clone}").replace(
        COMMIT, user_machine.commit)
    repo = tmp_path / "repo"
    proc = _pre_commit(config, repo, _repository(repo))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "src/train.py:11:19: PTL110" in proc.stdout


def test_ci_steps_work_once_filled_in(user_machine, tmp_path):
    """The workflow's `run:` steps, in order, in the fresh virtualenv."""
    [workflow] = blocks(section("CI"), "yaml")
    steps = re.findall(r"^\s*- run: (.*)$", workflow, re.M)
    assert len(steps) == 3 and placeholders(steps[0]) == [URL, COMMIT]
    install = steps[0].replace(URL, f"file://{user_machine.clone}").replace(
        COMMIT, user_machine.commit)
    project = project_with_findings(tmp_path / "project")
    proc = user_machine.run(install, project)
    assert proc.returncode == 0, proc.stderr
    annotations = user_machine.run(steps[1], project)
    assert annotations.returncode == 1
    assert annotations.stdout.startswith("::warning title=ptlint (PTL110),file=src/train.py,line=11,")
    sarif = user_machine.run(steps[2], project)
    assert sarif.returncode == 0, sarif.stderr
    log = json.loads((project / "ptlint.sarif").read_text())
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"PTL110"}
