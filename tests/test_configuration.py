"""Configuration through the command line: each file's nearest configuration
(hierarchical, as ruff), the target torch version inferred from the project,
and configuration mistakes that must be clear errors."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

MOVED = "import torch\n\nx = torch.zeros(3).cuda()\n"
LOAD = 'import torch\n\nstate = torch.load("ckpt.pt")\n'


def codes_by_file(stdout: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\S+):\d+:\d+: (PTL\d{3}) ", line)
        if match:
            out.setdefault(match.group(1), []).append(match.group(2))
    return out


def lint(cli, *args: str, cwd: Path):
    return cli(*args, "--output-format", "concise", "--no-cache", cwd=cwd)


# -- hierarchical configuration --------------------------------------------------------------
def test_each_file_uses_its_nearest_configuration(cli, tmp_path):
    """The issue's repro: A/pyproject.toml ignores PTL101; B has no configuration."""
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    (tmp_path / "A" / "pyproject.toml").write_text('[tool.ptlint]\nignore = ["PTL101"]\n')
    (tmp_path / "A" / "x.py").write_text(MOVED)
    (tmp_path / "B" / "y.py").write_text(MOVED)
    for order in (["A/x.py", "B/y.py"], ["B/y.py", "A/x.py"], ["."]):
        out = lint(cli, *order, cwd=tmp_path)
        assert codes_by_file(out.stdout) == {"B/y.py": ["PTL101"]}, (order, out.stdout)
    # from inside A, a file outside it takes the working directory's configuration (ruff's
    # fallback); --config applies one configuration to every file
    assert codes_by_file(lint(cli, "x.py", "../B/y.py", cwd=tmp_path / "A").stdout) == {}
    forced = lint(cli, "A/x.py", "B/y.py", "--config", "A/pyproject.toml", cwd=tmp_path)
    assert codes_by_file(forced.stdout) == {}
    # command-line options apply to every file, over each configuration
    ignored = lint(cli, "A/x.py", "B/y.py", "--ignore", "PTL101", cwd=tmp_path)
    assert ignored.returncode == 0 and codes_by_file(ignored.stdout) == {}
    # --show-settings names the file each one uses
    shown = cli("--show-settings", "A/x.py", cwd=tmp_path).stdout.splitlines()
    assert shown[1] == f"Settings path: {tmp_path / 'A' / 'pyproject.toml'}"
    assert cli("--show-settings", "B", cwd=tmp_path).stdout.splitlines()[:2] == [
        "Resolved settings for: B/y.py", "Settings path: none (defaults)"]


def test_a_nested_configuration_has_its_own_excludes_and_per_file_ignores(cli, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ptlint]\nextend-exclude = ["gen"]\n'
        '[tool.ptlint.per-file-ignores]\n"sub/tests/**" = ["PTL101"]\n')
    sub = tmp_path / "sub"
    (sub / "gen").mkdir(parents=True)
    (sub / "tests").mkdir()
    (tmp_path / "gen").mkdir()
    (sub / "ptlint.toml").write_text('[per-file-ignores]\n"gen/**" = ["PTL101"]\n')
    for path in ("gen/a.py", "sub/gen/b.py", "sub/tests/c.py", "sub/d.py"):
        (tmp_path / path).write_text(MOVED)
    # the root's excludes and per-file-ignores do not reach into sub, which has its own
    out = lint(cli, ".", cwd=tmp_path)
    assert codes_by_file(out.stdout) == {"sub/d.py": ["PTL101"], "sub/tests/c.py": ["PTL101"]}
    shown = cli("--show-files", cwd=tmp_path)
    assert shown.stdout.splitlines() == ["sub/d.py", "sub/gen/b.py", "sub/tests/c.py"]


def test_a_broken_nested_configuration_is_a_clear_error(cli, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ptlint.toml").write_text('slect = ["PTL101"]\n')
    (tmp_path / "sub" / "a.py").write_text(MOVED)
    out = lint(cli, ".", cwd=tmp_path)
    assert out.returncode == 2 and "unknown key 'slect'" in out.stderr
    assert "sub/ptlint.toml" in out.stderr and "Traceback" not in out.stderr


# -- the target torch version ------------------------------------------------------------------
@pytest.mark.parametrize("name, content, version", [
    ("pyproject.toml", '[project]\nname = "p"\ndependencies = ["numpy", "torch>=2.2,<2.5"]\n',
     "2.2"),
    ("pyproject.toml", '[project]\nname = "p"\n[project.optional-dependencies]\n'
                       'gpu = ["torch~=2.3.1"]\n', "2.3.1"),
    ("requirements-dev.txt", "-r base.txt\nnumpy  # arrays\ntorch==2.4.* ; python_version > '3'\n",
     "2.4"),
    ("setup.cfg", "[options]\ninstall_requires =\n    numpy\n    torch>2.1\n", "2.1.1"),
    ("setup.py", "from setuptools import setup\nREQS = ['torch>=1.13']\n"
                 "setup(name='p', install_requires=REQS)\n", "1.13"),
    # imported under another name
    ("setup.py", "from setuptools import (setup as install, find_packages)\n"
                 "install(name='p', install_requires=['numpy', 'torch>=2.1.0'])\n", "2.1"),
    # torchvision 0.14 needs torch 1.13: a newer floor than the project's own pin on torch
    ("requirements.txt", "torch>=1.7.1\ntorchvision>=0.14\n", "1.13"),
    ("requirements.txt", "torch>=2.2\ntorchvision>=0.13\n", "2.2"),
    # conda environment files: a conda spec with its build string, and the pip list
    ("environment.yml", "name: p\nchannels:\n  - pytorch\ndependencies:\n  - python=3.8\n"
                        "  - pytorch-cuda=11.8\n  - pytorch=1.13.1=py3.9_cuda11.7_cudnn8.5.0_0\n"
                        "  - torchvision=0.14.1=py39_cu117\n", "1.13.1"),
    ("conda_env.yaml", "dependencies:\n  - pytorch::pytorch\n  - pip\n  - pip:\n"
                       "    - torch==2.0.1\n", "2.0.1"),
    # a ceiling is no floor: not torch 1.0, but the newest release it admits (the
    # installed torch, 2.13, is above it)
    ("requirements.txt", "torch<2\n", "1.13"),
    ("environment.yml", "dependencies:\n  - python=3.9\n  - pytorch<=2.1.1\n", "2.1.1"),
    # any YAML file of a folder kept for conda environments; Cog's python_packages
    ("environment/project_env.yaml", "dependencies:\n  - pip:\n    - torch==2.0.1\n", "2.0.1"),
    ("cog.yaml", 'build:\n  gpu: true\n  python_packages:\n    - "numpy==1.21.1"\n'
                 '    - "torch==1.13.1"\n', "1.13.1"),
])
def test_the_torch_version_comes_from_the_project(cli, tmp_path, name, content, version):
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_text(content)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(LOAD)
    shown = cli("--show-settings", "src/m.py", cwd=tmp_path)
    assert shown.returncode == 0
    assert f'torch-version = "{version}"' in shown.stdout
    assert str(tmp_path / name) in shown.stdout  # and where it comes from
    # a security rule off since torch 2.6 is on for the versions the project supports
    out = lint(cli, "src", cwd=tmp_path)
    assert codes_by_file(out.stdout) == {"src/m.py": ["PTL301"]}


@pytest.mark.parametrize("files, version, source", [
    # a torchvision requirement raises only the torch requirement of its own list
    ({"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=1.8"]\n'
                        '[project.optional-dependencies]\ndocs = ["torchvision>=0.17"]\n'},
     "1.8", "torch>=1.8"),
    ({"requirements.txt": "torch>=1.8\n", "requirements-docs.txt": "torchvision>=0.17\n"},
     "1.8", "torch>=1.8"),
    # alone it declares nothing: the search goes on up to the project's torch requirement
    ({"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch>=2.1"]\n',
      "src/requirements.txt": "torchvision>=0.8\n"}, "2.1", "torch>=2.1"),
])
def test_a_torchvision_requirement_raises_only_its_own_lists_torch(cli, tmp_path, files, version,
                                                                    source):
    (tmp_path / ".git").mkdir()
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(content)
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "m.py").write_text(LOAD)
    shown = cli("--show-settings", "src/m.py", cwd=tmp_path)
    assert f'torch-version = "{version}"' in shown.stdout and source in shown.stdout, shown.stdout


@pytest.mark.parametrize("line", [
    "torch", "torch>=1.13", "Torch >= 1.13, < 3", "torch==2.1.*", "torch~=2.0", "torch===2.1.0",
    "torchvision[extra]>=0.15", "TorchVision [a, b] ==0.15.2", "torch>=1.13;python_version<'3.9'",
    "torch @ https://example.com/torch-2.1-cp311-none-any.whl", "torch>=x.y", "torch>>1",
    "torch-geometric>=2", "torch_scatter>=2", "torchvision.io", "torch [cuda>=1",
])
def test_a_plain_requirement_reads_as_packaging_reads_it(line):
    """The usual requirement lines skip packaging's full parser (its import is a tenth
    of a one-file run): what they give is what that parser gives."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from ptlint.target import _torch

    try:
        full = Requirement(line)
    except InvalidRequirement:
        expected = []
    else:
        name = canonicalize_name(full.name)
        expected = [(name, str(full.specifier))] if name in ("torch", "torchvision") else []
    found = [(req.name, str(req.specifier)) for req, text, where in _torch([line], "here")]
    assert found == expected


def test_each_file_targets_the_torch_version_of_its_own_project(cli, tmp_path):
    """Two projects linted from the folder above them, no ptlint configuration."""
    for name, requirement in (("old", "torch>=2.2"), ("new", "torch>=2.6")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "requirements.txt").write_text(requirement + "\n")
        (tmp_path / name / "m.py").write_text(LOAD)
    out = lint(cli, ".", cwd=tmp_path)
    assert codes_by_file(out.stdout) == {"old/m.py": ["PTL301"]}
    shown = cli("--show-settings", "new/m.py", cwd=tmp_path).stdout
    assert 'torch-version = "2.6"' in shown and str(tmp_path / "new" / "requirements.txt") in shown


def test_an_explicit_torch_version_wins_over_the_project(cli, tmp_path):
    (tmp_path / "requirements.txt").write_text("torch>=2.2,<2.5\n")
    (tmp_path / "m.py").write_text(LOAD)
    assert lint(cli, "m.py", "--torch-version", "2.6", cwd=tmp_path).returncode == 0
    shown = cli("--show-settings", "m.py", "--torch-version", "2.6", cwd=tmp_path).stdout
    assert 'torch-version = "2.6"' in shown and "--torch-version" in shown
    (tmp_path / "ptlint.toml").write_text('torch-version = "2.7"\n')
    shown = cli("--show-settings", "m.py", cwd=tmp_path).stdout
    assert 'torch-version = "2.7"' in shown and f"in {tmp_path / 'ptlint.toml'}" in shown


def test_without_a_declaration_the_installed_torch_is_read_not_imported(cli, tmp_path):
    """The linter reads the installed version from metadata; torch is never imported."""
    import subprocess
    import sys
    from importlib.metadata import version

    (tmp_path / "requirements.txt").write_text("torch\n")  # names no version
    (tmp_path / "m.py").write_text(LOAD)
    probe = ("import sys\nfrom ptlint.cli import main\n"
             "main(['--show-settings', 'm.py'])\nprint('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True)
    installed = version("torch").split("+")[0]
    assert f'torch-version = "{installed}"' in out.stdout
    assert "the installed torch" in out.stdout
    assert out.stdout.splitlines()[-1] == "False"


# -- mistakes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ['[tool.ptlint]\nselect = [""]\n',
                                     '[tool.ptlint]\nignore = ["PTL1", " "]\n',
                                     '[tool.ptlint]\nper-file-ignores = {"a.py" = [""]}\n'])
def test_an_empty_selector_in_the_configuration_is_an_error(cli, tmp_path, content):
    (tmp_path / "pyproject.toml").write_text(content)
    (tmp_path / "m.py").write_text(MOVED)
    out = lint(cli, "m.py", cwd=tmp_path)
    assert out.returncode == 2 and "empty rule selector" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("value", ["", ",", "PTL1,", ",PTL101"])
def test_an_empty_selector_on_the_command_line_is_an_error(cli, tmp_path, value):
    (tmp_path / "m.py").write_text(MOVED)
    for flag in ("--select", "--ignore", "--extend-select"):
        out = lint(cli, "m.py", flag, value, cwd=tmp_path)
        assert out.returncode == 2 and "empty rule selector" in out.stderr, (flag, value)


@pytest.mark.parametrize("content, message", [
    ("tool = 5\n", "`tool` must be a table, not int"),
    ('[tool]\nptlint = "yes"\n', "`tool.ptlint` must be a table, not str"),
])
@pytest.mark.parametrize("where", [".", "parent"])
def test_a_tool_that_is_not_a_table_is_a_clear_error(cli, tmp_path, content, message, where):
    project = tmp_path if where == "." else tmp_path / "inner"
    project.mkdir(exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(content)
    (project / "m.py").write_text(MOVED)
    out = lint(cli, "m.py", cwd=project)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and str(tmp_path / "pyproject.toml") in out.stderr
    assert "Traceback" not in out.stderr


def test_running_from_a_deleted_folder_is_a_clear_error(tmp_path):
    import subprocess
    import sys

    gone = tmp_path / "gone"
    script = (f"import os, subprocess, sys\nos.mkdir({str(gone)!r})\nos.chdir({str(gone)!r})\n"
              f"os.rmdir({str(gone)!r})\n"
              "p = subprocess.run([sys.executable, '-m', 'ptlint', '.'], capture_output=True, "
              "text=True)\nprint(p.returncode)\nprint(p.stderr)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path)
    code, stderr = out.stdout.split("\n", 1)
    assert code == "2"
    assert "the current folder no longer exists" in stderr and "Traceback" not in stderr


# -- ruff's layout: rule selection in a `lint` table ------------------------------------------
WRAP = "import torch\n\nnet = torch.nn.DataParallel(torch.nn.Linear(2, 2))\n"


@pytest.mark.parametrize("name, content", [
    ("pyproject.toml", '[tool.ptlint.lint]\nignore = ["PTL101"]\nper-file-ignores = {"b.py" = ["PTL102"]}\n'),
    ("ptlint.toml", '[lint]\nignore = ["PTL101"]\nper-file-ignores = {"b.py" = ["PTL102"]}\n'),
])
def test_rule_selection_may_sit_in_a_lint_table_as_in_ruff(cli, tmp_path, name, content):
    (tmp_path / name).write_text(content)
    (tmp_path / "a.py").write_text(MOVED + WRAP)
    (tmp_path / "b.py").write_text(WRAP)
    out = lint(cli, ".", cwd=tmp_path)
    assert codes_by_file(out.stdout) == {"a.py": ["PTL102"]}, out.stdout + out.stderr


@pytest.mark.parametrize("content, message", [
    ('[tool.ptlint]\nignore = ["PTL101"]\n[tool.ptlint.lint]\nignore = ["PTL301"]\n',
     "'ignore' is set both in `tool.ptlint.lint` and above it"),
    ('[tool.ptlint.lint]\ntorch-version = "2.1"\n',
     "unknown key 'torch-version' in `tool.ptlint.lint`"),
    ('[tool.ptlint]\nlint = 3\n', "`tool.ptlint.lint` must be a table, not int"),
])
def test_a_wrong_lint_table_is_a_clear_error(cli, tmp_path, content, message):
    (tmp_path / "pyproject.toml").write_text(content)
    (tmp_path / "a.py").write_text(MOVED)
    out = lint(cli, ".", cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr, out.stderr


# -- `extend`: one configuration built on another, as in ruff ---------------------------------
def test_a_configuration_extends_another_as_in_ruff(cli, tmp_path):
    """The base's settings first, the file's own on top: a key set again replaces
    the base's, an `extend-*` key adds to it, and a rule the base ignores can be
    selected again with `extend-select`."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ptlint]\nignore = ["PTL101"]\nextend-exclude = ["gen/"]\n'
        '[tool.ptlint.per-file-ignores]\n"old.py" = ["PTL102"]\n')
    sub = tmp_path / "sub"
    (sub / "gen").mkdir(parents=True)
    (sub / "build").mkdir()
    (sub / "ptlint.toml").write_text(
        'extend = "../pyproject.toml"\nextend-exclude = ["build/"]\n'
        '[lint]\nextend-select = ["PTL101"]\n')
    for name in ("a.py", "old.py", "gen/g.py", "build/b.py"):
        (sub / name).write_text(MOVED + WRAP)
    (tmp_path / "top.py").write_text(MOVED + WRAP)
    out = lint(cli, ".", cwd=tmp_path)
    assert codes_by_file(out.stdout) == {
        "sub/a.py": ["PTL101", "PTL102"],  # PTL101 selected again over the base's ignore
        "sub/old.py": ["PTL101"],          # the base's per-file-ignores, from sub's folder
        "top.py": ["PTL102"],              # the base itself, unchanged
    }, out.stdout + out.stderr
    # a selection of its own leaves the base's behind
    (sub / "ptlint.toml").write_text('extend = "../pyproject.toml"\nselect = ["PTL101"]\n')
    assert codes_by_file(lint(cli, "sub/a.py", cwd=tmp_path).stdout) == {"sub/a.py": ["PTL101"]}
    settings = cli("--show-settings", "sub/a.py", cwd=tmp_path).stdout
    assert f"Settings path: {sub / 'ptlint.toml'}" in settings
    assert f"  extends: {tmp_path / 'pyproject.toml'}" in settings


def test_a_base_of_another_name_and_an_extend_chain(cli, tmp_path, monkeypatch):
    """`~` and environment variables are expanded; the base may extend in turn;
    a file of another name holds its settings in `[tool.ptlint]` or at its top."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "root.toml").write_text('ignore = ["PTL102"]\n')
    (tmp_path / "shared" / "mid.toml").write_text(
        '[tool.ptlint]\nextend = "root.toml"\nextend-select = ["PTL113"]\n')
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text(
        '[tool.ptlint]\nextend = "$SHARED/mid.toml"\n')
    (tmp_path / "proj" / "a.py").write_text(MOVED + WRAP)
    monkeypatch.setenv("SHARED", str(tmp_path / "shared"))
    out = lint(cli, ".", cwd=tmp_path / "proj")
    assert codes_by_file(out.stdout) == {"a.py": ["PTL101"]}, out.stdout + out.stderr
    settings = cli("--show-settings", "a.py", cwd=tmp_path / "proj").stdout
    assert '"PTL113"' in settings and '"PTL102"' not in settings


@pytest.mark.parametrize("content, message", [
    ('extend = "nope.toml"\n', "ptlint.toml: extend: no such configuration file 'nope.toml'"),
    ('extend = 3\n', "ptlint.toml: extend: expected the path of a configuration file"),
    ('extend = "ptlint.toml"\n', "extend: the files extend each other in a circle"),
    ('extend = "base.toml"\n', "base.toml: ignore: unknown rule selector 'PTL9'"),
    ('extend = "base.toml"\nextend-select = ["PTL113"]\n',
     "base.toml: ignore: unknown rule selector 'PTL9'"),
])
def test_a_wrong_extend_is_a_clear_error(cli, tmp_path, content, message):
    (tmp_path / "base.toml").write_text('ignore = ["PTL9"]\n')
    (tmp_path / "ptlint.toml").write_text(content)
    (tmp_path / "a.py").write_text(MOVED)
    out = lint(cli, ".", cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
