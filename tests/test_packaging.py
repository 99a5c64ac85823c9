"""The package as users get it: a wheel in a fresh virtualenv, `ptlint verify`
from it, and the pre-commit hooks."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.slow


def _run(*cmd, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


DATA = "ptlint/verify/data/"


def test_the_code_needs_no_newer_python_than_it_claims():
    """pyproject's `requires-python` is the oldest Python ptlint runs on: no module,
    function or syntax of a newer one (vermin reads the source; `import tomllib`,
    for one, needs 3.11 and has a guarded fallback)."""
    from ptlint.config import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    oldest = project["requires-python"].removeprefix(">=")
    vermin = Path(sys.executable).parent / "vermin"
    proc = _run(vermin, "-q", "--no-tips", "--eval-annotations", "--violations",
                f"--target={oldest}-", "ptlint", "rules", "fixers", "scripts", cwd=ROOT, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def _shipped(wheel: Path) -> set[str]:
    import zipfile

    return {n.removeprefix(DATA) for n in zipfile.ZipFile(wheel).namelist() if n.startswith(DATA)}


def test_wheel_ships_what_verify_runs_and_nothing_more(tmp_path):
    """The runnable pairs and the rules' runtime checks, in the checkout's layout;
    no near-miss fixtures, no tests, no pair that does not run. The same from a
    source distribution."""
    from ptlint.verify.checks import rule_pairs, shipped_files

    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT)
    [wheel] = dist.glob("ptlint-*.whl")
    shipped = _shipped(wheel)
    assert shipped == {f.as_posix() for f in shipped_files(ROOT)}
    pairs = rule_pairs(ROOT)
    assert {"fixtures/PTL122_conv_bias_before_batchnorm/bad.py", "runtime_checks/ptl003.py",
            "runtime_checks/programs/PTL001_loss_kept_with_graph/fixed.py"} <= shipped
    assert not any(n.endswith(("good.py", "test_runtime.py", ".md")) for n in shipped)
    assert "fixtures/PTL201_removed_api/bad.py" not in shipped and "PTL201" not in pairs
    assert "fixtures/PTL001_loss_kept_with_graph/bad.py" not in shipped  # the program wins
    assert {name.split("/")[-2] for name in shipped if name.endswith("bad.py")} == \
        {folder.name for _, folder in pairs.values()}
    assert wheel.stat().st_size < 700_000  # code and fixtures only (about 0.5 MB): no data
    _run(sys.executable, "-m", "build", "--sdist", "-o", dist, ROOT)
    [sdist] = dist.glob("ptlint-*.tar.gz")
    from_sdist = tmp_path / "from-sdist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", from_sdist, sdist)
    [wheel2] = from_sdist.glob("ptlint-*.whl")
    assert _shipped(wheel2) == shipped


def test_verify_runs_from_the_installed_wheel_in_any_folder(user_machine, tmp_path):
    """`pip install ".[runtime]"` (torch pinned by the constraints file) in a fresh
    virtualenv; then `ptlint verify` and `ptlint verify PTL001` in a folder that
    has nothing to do with the checkout."""
    from ptlint.verify.checks import rule_pairs

    m = user_machine
    install = m.run(f'pip install -q -c {ROOT / "constraints.txt"} ".[runtime]"', cwd=m.clone)
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    package = m.run("python -c 'import ptlint, os; print(os.path.dirname(ptlint.__file__))'",
                    elsewhere).stdout.strip()
    assert package.startswith(str(m.venv)) and "site-packages" in package
    every = m.run("ptlint verify --no-timing -j 2 --output-format json", elsewhere)
    assert every.returncode == 0, every.stdout[-3000:] + every.stderr
    checks = json.loads(every.stdout)["checks"]
    assert {c["rule"] for c in checks} == set(rule_pairs(ROOT))
    assert all(c["passed"] for c in checks)
    data = os.path.join(package, "verify", "data") + os.sep
    assert all(c["bad"]["path"].startswith(data) for c in checks)
    one = m.run("ptlint verify PTL001", elsewhere)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "PTL001 loss-kept-with-graph: passed on cpu" in one.stdout
    assert "1 passed, 0 failed" in one.stdout
    assert not any(elsewhere.iterdir()), "verify leaves nothing in the folder it runs in"


def test_wheel_installs_and_lints(tmp_path):
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT)
    [wheel] = dist.glob("ptlint-*.whl")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("ptlint/rules/ptl102_") for n in names)
    assert any(n.startswith("ptlint/fixers/arguments.py") for n in names)
    assert not any(n.startswith(("rules/", "fixers/")) for n in names), "no top-level rules/fixers"
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    _run(bin_dir / "python", "-m", "pip", "install", "-q", wheel)
    # the linter itself must not need torch
    assert _run(bin_dir / "python", "-c", "import importlib.util as u; print(u.find_spec('torch'))").stdout.strip() == "None"
    version = _run(bin_dir / "ptlint", "--version", cwd=tmp_path)
    from ptlint import __version__

    assert version.stdout.strip() == f"ptlint {__version__}"
    target = tmp_path / "bad.py"
    shutil.copy(FIXTURES / "PTL102_data_parallel" / "bad.py", target)
    out = _run(bin_dir / "ptlint", "check", "--output-format", "concise", target, cwd=tmp_path, check=False)
    assert out.returncode == 1, out.stderr
    assert "PTL102" in out.stdout
    assert _run(bin_dir / "ptlint", "rule", "PTL102", cwd=tmp_path).stdout.startswith("# data-parallel")


def test_pre_commit_hooks(tmp_path):
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    assert pre_commit, "pre-commit is a dev dependency"
    repo = tmp_path / "user-repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    _run("git", "init", "-q", cwd=repo)
    (repo / "pyproject.toml").write_text('[tool.ptlint]\nextend-safe-fixes = ["PTL102"]\n')
    shutil.copy(FIXTURES / "PTL102_data_parallel" / "bad.py", repo / "train.py")
    _run("git", "add", ".", cwd=repo)
    check = _run(pre_commit, "try-repo", ROOT, "ptlint", "--all-files", cwd=repo, env=env, check=False)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "PTL102" in check.stdout
    fix = _run(pre_commit, "try-repo", ROOT, "ptlint-fix", "--all-files", cwd=repo, env=env, check=False)
    assert "DistributedDataParallel(model) if" in (repo / "train.py").read_text(), fix.stdout
    _run("git", "add", ".", cwd=repo)
    again = _run(pre_commit, "try-repo", ROOT, "ptlint", "--all-files", cwd=repo, env=env, check=False)
    # what is left has no fix (a model moved after the wrap, `**options`, a subclass)
    remaining = [l for l in again.stdout.splitlines() if "PTL102" in l]
    assert all("bad.py" not in l for l in remaining)
    assert "nn.DataParallel(net, **options)" in (repo / "train.py").read_text()
