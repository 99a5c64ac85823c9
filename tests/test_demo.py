"""`make demo` shows the product and passes; `.ci/run` runs the tests and the demo."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, expectations

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent  # the virtualenv running the tests, with ptlint in it


def make_demo(verify: str) -> subprocess.CompletedProcess:
    """`make demo`, with this virtualenv taken as installed (-o: not rebuilt)."""
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "demo",
                           f"BIN={BIN}", f"VERIFY={verify}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def test_make_demo_shows_findings_the_autofixer_and_verify_and_passes():
    pytest.importorskip("torch")
    proc = make_demo("PTL110 --no-timing")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Error" not in out and "(ignored)" not in out
    lines = proc.stdout.splitlines()
    # findings, per rule and in full
    assert any(line.split()[1:3] == ["PTL202", "[*]"] for line in lines if len(line.split()) > 2)
    bad = FIXTURES / "PTL001_loss_kept_with_graph" / "bad.py"
    first = min(line for line, code in expectations(bad.read_text()) if code == "PTL001")
    assert re.search(rf"^fixtures/PTL001_loss_kept_with_graph/bad.py:{first}:\d+: PTL001 ",
                     proc.stdout, re.M)
    # the autofixer: a diff, the fix, the fixed file clean
    diff = proc.stdout.index("$ ptlint check --diff --no-cache train.py")
    assert "--- a/train.py" in proc.stdout[diff:] and "+    out[\"plus\"] = torch.log1p(x)" in \
        proc.stdout
    fixed = proc.stdout.index("$ ptlint check --fix --no-cache train.py")
    clean = proc.stdout.index("$ ptlint check --no-cache train.py")
    assert diff < fixed < clean
    # the demo fixes PTL110's bad.py, where every finding has a safe fix
    example = (FIXTURES / "PTL110_log_of_one_plus" / "bad.py").read_text()
    fixes = sum(code == "PTL110" for _, code in expectations(example))
    assert f"Fixed {fixes} findings, 0 remaining." in proc.stdout[fixed:clean]
    assert "All checks passed!" in proc.stdout[clean:]
    # the runtime companion, then one line that sums it up
    assert "PTL110 log-of-one-plus: passed on cpu" in proc.stdout
    assert "report written to verify.html" in proc.stdout
    assert (ROOT / "verify.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # a training script run as a program: its validation's memory, and output compared
    assert "PTL001 train_digits.py: passed on cpu" in proc.stdout
    assert "found     output equal: " in proc.stdout
    assert lines[-1].startswith("demo passed: ") and lines[-1].endswith(
        f", {fixes} fixes, 1 of 1 runtime checks passed")


def test_a_failing_step_fails_the_demo():
    proc = make_demo("PTL900")  # no such rule: `ptlint verify` exits 2
    assert proc.returncode != 0
    assert proc.stdout.splitlines()[-1] == (
        "demo FAILED: `ptlint verify --report verify.html PTL900` exited 2, expected 0")


def _ci(tmp_path: Path, failing: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`.ci/run` with a `make` that records its targets and fails on `failing`."""
    log = tmp_path / "make.log"
    fake = tmp_path / "bin" / "make"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ "$1" != "{failing}" ]\n')
    fake.chmod(0o755)
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().split("\n")[:-1] if log.exists() else []


def test_ci_runs_the_tests_then_the_demo(tmp_path):
    proc, targets = _ci(tmp_path, failing="none")
    assert proc.returncode == 0 and targets == ["test", "demo"]
    proc, targets = _ci(tmp_path, failing="demo")
    assert proc.returncode != 0 and targets == ["test", "demo"]
    proc, targets = _ci(tmp_path, failing="test")
    assert proc.returncode != 0 and targets == ["test"]
