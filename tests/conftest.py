from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A cache folder the user set for their own runs would move the tests' caches out of
# their projects: the tests that want one set it themselves.
os.environ.pop("PTLINT_CACHE_DIR", None)
FIXTURES = ROOT / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>PTL\d{3}(?:\s*,\s*PTL\d{3})*)")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test` runs `pytest -n auto --dist loadgroup`), the
    tests of one file run in one worker, in order, as they do without it; the
    README's and the packaging tests share one, as they share `user_machine` (a
    fresh virtualenv with torch installed: minutes to build)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    shared = ("test_readme.py", "test_packaging.py")
    for item in items:
        group = "user_machine" if item.path.name in shared else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))


def fixture_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"PTL\d{3}_", p.name))


def expectations(text: str) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(text.splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            out |= {(number, c.strip()) for c in match.group("codes").split(",")}
    return out


def pool_padding(files: int) -> str:
    """A comment that makes each of `files` files big enough, together, for ptlint
    to start a pool of workers rather than lint them in its own process."""
    from ptlint.engine.run import POOL_MIN_BYTES

    return "#" * (POOL_MIN_BYTES // files) + "\n"


def settings_for(*codes: str, **changes):
    from ptlint.config import Settings, validate

    settings = Settings(select=list(codes), **changes)
    validate(settings)
    return settings


def run_cli(*args: str, cwd: Path | None = None, stdin: str | bytes | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """`ptlint ...` as a user runs it: a subprocess."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "ptlint", *args], cwd=cwd, input=data,
                          capture_output=True, env=env, timeout=300)
    proc.stdout = proc.stdout.decode("utf-8", "replace")  # type: ignore[assignment]
    proc.stderr = proc.stderr.decode("utf-8", "replace")  # type: ignore[assignment]
    return proc


@pytest.fixture
def cli():
    return run_cli


@dataclass
class Machine:
    """A new user's machine: a fresh virtualenv and a clone of ptlint."""

    work: Path  # the folder the user works in; holds the clone
    clone: Path  # work/ptlint
    commit: str  # the clone's HEAD
    venv: Path
    env: dict[str, str]  # the virtualenv first on PATH; torch pinned as `make` pins it

    def run(self, command: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
        """`command` in bash, as typed in a shell with the virtualenv active."""
        return subprocess.run(["bash", "-c", command], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def user_machine(tmp_path_factory) -> Machine:
    """A fresh virtualenv (pip and nothing else) and a git clone of this checkout's
    files as they are now. Shared by the README and packaging tests, because
    installing torch into a virtualenv takes minutes."""
    work = tmp_path_factory.mktemp("user")
    clone = work / "ptlint"
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run(["git", *args], cwd=clone, env=git_env, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout.strip()
    venv_dir = work / "venv"
    venv.create(venv_dir, with_pip=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(VIRTUAL_ENV=str(venv_dir), PATH=f"{venv_dir / 'bin'}{os.pathsep}{env['PATH']}",
               PIP_CONSTRAINT=str(ROOT / "constraints.txt"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return Machine(work, clone, commit, venv_dir, env)


def ptl102_fixes_notebooks_env(env: dict | None = None) -> dict:
    """The environment for a `ptlint` subprocess in which PTL102 fixes every call it
    can rebuild, in notebooks too (the rule itself offers no fix there): tests of the
    notebook machinery use it as a fix that adds an import (see tests/robust_plugin)."""
    env = dict(os.environ if env is None else env)
    plugin = str(ROOT / "tests" / "robust_plugin")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [plugin, env.get("PYTHONPATH")]))
    env["PTLINT_TEST_NOTEBOOK_FIXES"] = "1"
    return env
