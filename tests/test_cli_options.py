"""The options ruff users reach for, and help instead of a lint of `.` for
mistakes, through the command line."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

MOVED = "import torch\n\nx = torch.zeros(3).cuda()\ny = torch.ones(2).cuda()\n"
FIXED = 'import torch\n\nx = torch.zeros(3, device="cuda")\ny = torch.ones(2, device="cuda")\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(MOVED)
    return tmp_path


def test_stdin_filename_alone_reads_standard_input(cli, project):
    (project / "sub").mkdir()
    (project / "sub" / "other.py").write_text(MOVED)
    out = cli("--stdin-filename", "fed.py", "--output-format", "concise", stdin=MOVED,
              cwd=project)
    assert out.returncode == 1
    assert {l.split(":")[0] for l in out.stdout.splitlines() if "PTL101" in l} == {"fed.py"}
    # with paths, standard input wins, as in ruff, and the paths are named
    both = cli("--stdin-filename", "fed.py", "sub", "--output-format", "concise",
               stdin="x = 1\n", cwd=project)
    assert both.returncode == 0 and "PTL101" not in both.stdout
    assert "warning: ignoring sub in favour of standard input" in both.stderr


def test_output_file_gets_the_report(cli, project):
    out = cli("m.py", "-o", "report.txt", cwd=project)
    assert out.returncode == 1 and out.stdout == ""
    text = (project / "report.txt").read_text()
    assert "m.py:3:5: PTL101" in text and "Found 2 findings." in text and "\x1b[" not in text
    js = cli("m.py", "--output-format", "json", "--output-file", "out/r.json", cwd=project)
    assert js.returncode == 2 and "out/r.json: cannot write" in js.stderr
    (project / "out").mkdir()
    assert cli("m.py", "--output-format", "json", "-o", "out/r.json", cwd=project).returncode == 1
    assert [f["code"] for f in json.loads((project / "out/r.json").read_text())] == ["PTL101"] * 2


def test_show_fixes_and_exit_non_zero_on_fix(cli, project):
    out = cli("m.py", "--fix", "--show-fixes", cwd=project)
    assert out.returncode == 0
    assert "Fixed 2 findings:\n- m.py:\n    2 × PTL101 (tensor-moved-after-creation)\n" in out.stdout
    assert (project / "m.py").read_text() == FIXED
    (project / "m.py").write_text(MOVED)
    strict = cli("m.py", "--fix", "--exit-non-zero-on-fix", cwd=project)
    assert strict.returncode == 1 and "Fixed 2 findings, 0 remaining." in strict.stdout
    assert "× PTL101" not in strict.stdout  # only with --show-fixes
    nothing = cli("m.py", "--fix", "--exit-non-zero-on-fix", cwd=project)
    assert nothing.returncode == 0


def test_fix_only_fixes_and_reports_nothing_that_remains(cli, project):
    (project / "m.py").write_text(MOVED + "state = torch.load('w.pt')\n")
    out = cli("m.py", "--fix-only", cwd=project)
    assert out.returncode == 0, out.stderr  # PTL301 remains: not reported, not a failure
    assert out.stdout == "Fixed 2 findings.\n"
    assert (project / "m.py").read_text() == FIXED + "state = torch.load('w.pt')\n"
    again = cli("m.py", "--fix-only", "--exit-non-zero-on-fix", cwd=project)
    assert (again.returncode, again.stdout) == (0, "Fixed 0 findings.\n")
    (project / "m.py").write_text(MOVED)
    strict = cli("m.py", "--fix-only", "--exit-non-zero-on-fix", "-q", cwd=project)
    assert (strict.returncode, strict.stdout) == (1, "")
    assert cli("m.py", "--fix-only", "--add-noqa", cwd=project).returncode == 2

def test_color(cli, project):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    assert "\x1b[" not in cli("m.py", cwd=project, env=env).stdout  # auto: not a terminal
    assert "\x1b[" in cli("m.py", "--color", "always", cwd=project, env=env).stdout
    never = cli("m.py", "--color", "never", cwd=project, env={**env, "FORCE_COLOR": "1"})
    assert "\x1b[" not in never.stdout and "m.py:3:5: PTL101" in never.stdout


def test_quiet_and_silent(cli, project):
    (project / "m.py").write_text(MOVED.replace("cuda()\ny", "cuda()  # noqa: nonsense\ny"))
    normal = cli("m.py", "nope.py", cwd=project)
    assert "Found 2 findings." in normal.stdout and "warning:" in normal.stderr
    quiet = cli("m.py", "nope.py", "-q", "--output-format", "concise", cwd=project)
    assert quiet.returncode == 2
    assert len(quiet.stdout.splitlines()) == 2 and "Found" not in quiet.stdout
    assert quiet.stderr == "error: nope.py: no such file or directory\n"
    silent = cli("m.py", "nope.py", "--silent", cwd=project)
    assert (silent.returncode, silent.stdout, silent.stderr) == (2, "", "")
    assert cli("m.py", "-s", cwd=project).returncode == 1


def test_help_describes_every_option(cli):
    text = " ".join(cli("check", "--help").stdout.split())
    assert "rule names (data-parallel)" in text and "a rule name works" in text
    from ptlint.cli import build_parser

    parser = build_parser()
    check = next(a for a in parser._actions if a.dest == "command").choices["check"]
    for action in check._actions:
        assert action.help, f"{action.option_strings or action.dest} has no description"
        for option in action.option_strings:
            assert option in text
    assert "check --help" in cli("--help").stdout


@pytest.mark.parametrize("argv, meant", [(["chek", "."], "check"), (["rulez", "PTL001"], "rule"),
                                         (["claen"], "clean")])
def test_a_mistyped_command_gets_help_and_lints_nothing(cli, project, argv, meant):
    out = cli(*argv, cwd=project)
    assert out.returncode == 2 and out.stdout == ""
    assert f"unknown command {argv[0]!r}; did you mean {meant!r}?" in out.stderr
    assert not (project / ".ptlint_cache").exists()
    # a folder of that name is linted as before
    (project / argv[0]).mkdir()
    assert cli(*argv[:1], cwd=project).returncode == 0


def test_a_mistyped_option_shows_the_check_options(cli, project):
    out = cli("--fixx", ".", cwd=project)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("usage: ptlint check ")
    assert "--unsafe-fixes" in out.stderr
    assert "unrecognized argument '--fixx'; did you mean '--fix'?" in out.stderr
    assert (project / "m.py").read_text() == MOVED


def test_no_python_files_is_a_warning(cli, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.md").write_text("# nothing to lint\n")
    out = cli("docs", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == ""
    assert out.stderr == "warning: No Python files found under the given path(s)\n"
    assert cli("docs", "-q", cwd=tmp_path).stderr == ""


def test_show_files_and_show_settings_lint_nothing(cli, project):
    (project / "nb.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4}')
    (project / "build").mkdir()
    (project / "build" / "x.py").write_text(MOVED)
    files = cli("--show-files", cwd=project)
    assert files.returncode == 0 and files.stdout.splitlines() == ["m.py", "nb.ipynb"]
    (project / "pyproject.toml").write_text('[tool.ptlint]\nextend-select = ["PTL090"]\n')
    shown = cli("--show-settings", "--ignore", "PTL102", cwd=project)
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    assert lines[0] == "Resolved settings for: m.py"
    assert lines[1] == f"Settings path: {project / 'pyproject.toml'}"
    assert 'extend-select = ["PTL090"]' in lines and 'ignore = ["PTL102"]' in lines
    assert "  PTL090 unused-noqa" in lines and "  PTL102 data-parallel" not in lines
    assert not (project / ".ptlint_cache").exists()


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes]:
    """Run ptlint with stderr on a pseudo-terminal; what reached the terminal."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ptlint", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    code = proc.wait(timeout=300)
    reader.join(timeout=60)
    os.close(master)
    return code, b"".join(chunks)


def test_progress_bar_only_for_people(tmp_path):
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(MOVED)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PTLINT_PROGRESS_DELAY="0", TERM="xterm")
    code, shown = _on_a_terminal([".", "--no-cache", "-j", "1"], tmp_path, env)
    assert code == 1
    assert re.search(rb"linting.*\d/6", shown), shown[:300]
    for extra, more_env in ((["--output-format", "json"], {}), ([], {"CI": "true"}),
                            (["-q"], {})):
        code, shown = _on_a_terminal([".", "--no-cache", "-j", "1", *extra], tmp_path,
                                     {**env, **more_env})
        assert code == 1 and b"linting" not in shown, (extra, more_env)
    # not on a terminal: nothing
    piped = subprocess.run([sys.executable, "-m", "ptlint", ".", "--no-cache"], cwd=tmp_path,
                           env=env, capture_output=True)
    assert b"linting" not in piped.stderr and b"\x1b[" not in piped.stderr


def test_fix_true_in_the_configuration_and_no_fix(cli, project):
    (project / "pyproject.toml").write_text("[tool.ptlint]\nfix = true\n")
    kept = cli("m.py", "--no-fix", cwd=project)
    assert kept.returncode == 1 and (project / "m.py").read_text() == MOVED
    assert "fix = true" in cli("--show-settings", "m.py", cwd=project).stdout
    fixed = cli("m.py", cwd=project)
    assert fixed.returncode == 0 and "Fixed 2 findings, 0 remaining." in fixed.stdout
    assert (project / "m.py").read_text() == FIXED
    (project / "m.py").write_text(MOVED)
    assert cli("m.py", "--diff", cwd=project).returncode == 1  # --diff still changes nothing
    assert (project / "m.py").read_text() == MOVED
    (project / "pyproject.toml").write_text("[tool.ptlint]\nfix = 1\n")
    bad = cli("m.py", cwd=project)
    assert bad.returncode == 2 and "fix: expected true or false" in bad.stderr


def test_show_fixes_in_the_configuration_and_no_show_fixes(cli, project):
    (project / "pyproject.toml").write_text("[tool.ptlint]\nshow-fixes = true\n")
    shown = cli("m.py", "--fix", cwd=project)
    assert "2 × PTL101 (tensor-moved-after-creation)" in shown.stdout
    (project / "m.py").write_text(MOVED)
    hidden = cli("m.py", "--fix", "--no-show-fixes", cwd=project)
    assert "× PTL101" not in hidden.stdout and "Fixed 2 findings, 0 remaining." in hidden.stdout


def test_extend_fixable_adds_to_fixable(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint.lint]\nfixable = ["PTL0"]\n')
    kept = cli("m.py", "--diff", cwd=project)
    assert kept.returncode == 0 and kept.stdout == ""  # PTL101 is not fixable here
    assert cli("m.py", "--diff", "--extend-fixable", "PTL101", cwd=project).returncode == 1
    (project / "pyproject.toml").write_text(
        '[tool.ptlint.lint]\nfixable = ["PTL0"]\nextend-fixable = ["tensor-moved-after-creation"]\n')
    assert cli("m.py", "--diff", cwd=project).returncode == 1
    bad = cli("m.py", "--extend-fixable", "PTL9", cwd=project)
    assert bad.returncode == 2 and "--extend-fixable: unknown rule selector 'PTL9'" in bad.stderr


def test_per_file_ignores_on_the_command_line(cli, project):
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(MOVED)
    (project / "pyproject.toml").write_text(
        '[tool.ptlint]\nper-file-ignores = {"m.py" = ["PTL101"]}\n'
        'extend-per-file-ignores = {"other.py" = ["PTL1"]}\n')

    def flagged(*args: str) -> set[str]:
        out = cli(".", "--output-format", "concise", "--no-cache", *args, cwd=project)
        return {line.split(":")[0] for line in out.stdout.splitlines() if "PTL101" in line}

    assert flagged() == {"tests/t.py"}
    # --per-file-ignores replaces the configuration's per-file-ignores
    assert flagged("--per-file-ignores", "tests/*:PTL101") == {"m.py"}
    # pairs add up, and a rule without a glob goes with the glob before it
    assert flagged("--per-file-ignores", "tests/*:PTL102,PTL101", "--per-file-ignores",
                   "m.py:PTL1") == set()
    # --extend-per-file-ignores adds to both
    assert flagged("--extend-per-file-ignores", "tests/*:tensor-moved-after-creation") == set()
    settings = cli("--show-settings", "m.py", "--extend-per-file-ignores", "other.py:PTL0",
                   cwd=project).stdout
    assert 'extend-per-file-ignores = {"other.py": ["PTL1", "PTL0"]}' in settings
    bad = cli(".", "--per-file-ignores", "PTL101", cwd=project)
    assert bad.returncode == 2 and "expected GLOB:RULES pairs" in bad.stderr
    (project / "pyproject.toml").write_text(
        '[tool.ptlint]\nextend-per-file-ignores = {"m.py" = ["PTL9"]}\n')
    bad = cli(".", cwd=project)
    assert bad.returncode == 2
    assert "pyproject.toml: extend-per-file-ignores.m.py: unknown rule selector 'PTL9'" in bad.stderr


def test_isolated_and_exclude(cli, project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\nignore = ["PTL101"]\n')
    assert cli("m.py", cwd=project).returncode == 0
    isolated = cli("m.py", "--isolated", "--output-format", "concise", cwd=project)
    assert isolated.returncode == 1 and "PTL101" in isolated.stdout
    both = cli("m.py", "--isolated", "--config", "pyproject.toml", cwd=project)
    assert both.returncode == 2 and "cannot be combined with --config FILE" in both.stderr
    (project / "skip.py").write_text(MOVED)
    files = cli(".", "--isolated", "--exclude", "skip.py", "--show-files", cwd=project)
    assert files.stdout.split() == ["m.py"]
    # --exclude replaces the defaults too, as in ruff (`.venv` is linted then)
    (project / ".venv").mkdir()
    (project / ".venv" / "lib.py").write_text(MOVED)
    assert cli(".", "--show-files", cwd=project).stdout.split() == ["m.py", "skip.py"]
    excluded = cli(".", "--exclude", "skip.py", "--show-files", cwd=project)
    assert sorted(excluded.stdout.split()) == [".venv/lib.py", "m.py"]


def test_config_takes_settings_as_ruff_does(cli, project):
    """`--config 'KEY = VALUE'` (TOML, `lint.` keys too) overrides every configuration
    file's setting, and the options override it; a file and settings combine."""
    (project / "pyproject.toml").write_text('[tool.ptlint]\nselect = ["PTL102"]\n')
    assert cli("m.py", cwd=project).returncode == 0  # the file selects PTL102 only
    inline = cli("m.py", "--config", 'lint.select = ["PTL101"]', "--output-format", "concise",
                 cwd=project)
    assert inline.returncode == 1 and inline.stdout.count("PTL101") == 2
    # repeated; with a file named too; the option wins over the setting
    (project / "other.toml").write_text('[tool.ptlint]\nignore = ["PTL101"]\n')
    assert cli("m.py", "--config", "other.toml", "--config", 'select = ["PTL101"]',
               cwd=project).returncode == 0
    assert cli("m.py", "--config", 'select = ["PTL101"]', "--ignore", "PTL101",
               cwd=project).returncode == 0
    # --show-settings names the setting as its source, not an option never given
    shown = cli("--show-settings", "m.py", "--config", 'torch-version = "2.1"', cwd=project)
    assert "  # from --config 'torch-version = \"2.1\"'" in shown.stdout, shown.stdout
    # --isolated reads no file, but takes settings
    isolated = cli("m.py", "--isolated", "--config", 'ignore = ["PTL101"]', cwd=project)
    assert isolated.returncode == 0, isolated.stderr
    for wrong, says in (("select = 'PTL101'", "select: expected a list of strings"),
                        ("lint.colour = 1", "unknown key 'colour' in `lint`"),
                        ("speed = 1", "unknown key 'speed'"),
                        ("missing.toml", "no such configuration file, nor a KEY = VALUE")):
        proc = cli("m.py", "--config", wrong, cwd=project)
        assert proc.returncode == 2 and says in proc.stderr, (wrong, proc.stderr)
    two = cli("m.py", "--config", "pyproject.toml", "--config", "other.toml", cwd=project)
    assert two.returncode == 2 and "one configuration file at most" in two.stderr


def test_version_command(cli):
    text = cli("version")
    assert text.returncode == 0 and re.fullmatch(r"ptlint \d+\.\d+\.\d+\S*\n", text.stdout)
    as_json = cli("version", "--output-format", "json")
    assert json.loads(as_json.stdout)["version"] == text.stdout.split()[1]


def test_watch_lints_again_when_a_file_changes(tmp_path):
    """`--watch` (ruff's): a run, then one after each change, until Ctrl-C (exit 0).
    Waits on what ptlint prints, not on the clock."""
    import queue
    import signal
    import subprocess
    import sys
    import threading

    (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    proc = subprocess.Popen([sys.executable, "-m", "ptlint", "--watch", "--no-cache",
                             "--output-format", "concise"], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: queue.Queue = queue.Queue()
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [lines.put(l.rstrip("\n")) for l in s],
                         daemon=True).start()

    def until(*wanted: str) -> list[str]:
        """The lines read until one starting with each of `wanted` has come: stdout's
        and stderr's lines reach the queue in either order."""
        seen: list[str] = []
        while not all(any(line.startswith(w) for line in seen) for w in wanted):
            seen.append(lines.get(timeout=120))
        return seen

    try:
        first = until("Watching for file changes.", "a.py:2:5: PTL101")
        assert "Starting linter in watch mode..." in first
        (tmp_path / "a.py").write_text("import torch\nx = torch.zeros(3)\n")
        second = until("Watching for file changes.", "File change detected...",
                       "All checks passed!")
        assert not any(line.startswith("a.py:2:5: PTL101") for line in second), second
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    refused = subprocess.run([sys.executable, "-m", "ptlint", "--watch", "-"], input="x = 1\n",
                             text=True, capture_output=True)
    assert refused.returncode == 2 and "--watch" in refused.stderr


def test_watch_stops_on_a_ctrl_c_that_was_dropped(tmp_path):
    """A KeyboardInterrupt that Python drops (raised while a finalizer runs, it is
    printed and lost) still stops --watch: the loop checks a flag its handler sets."""
    import signal

    from ptlint.watch import watch

    runs = []

    def lint() -> int:
        assert not runs, "linted again after Ctrl-C"
        runs.append(1)
        (tmp_path / "a.py").write_text(f"x = {len(runs)}\n")  # a change to lint again for
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # dropped, as in a finalizer
        return 0

    assert watch([str(tmp_path)], lint) == 0 and runs == [1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
