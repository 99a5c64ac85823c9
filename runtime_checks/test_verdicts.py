"""`ptlint verify`'s three verdicts: passed (something was compared and held),
failed, and inconclusive (nothing comparable), through the command line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_runtime import ROOT, ptlint  # noqa: E402

MAIN = "def main(device='cpu'):\n    return {body}\n"


def _verify_pair(tmp_path: Path, bad: str, fixed: str) -> tuple[int, dict]:
    folder = tmp_path / "fixtures" / "PTL998_pair"
    folder.mkdir(parents=True)
    (tmp_path / "runtime_checks").mkdir()
    (folder / "bad.py").write_text(MAIN.format(body=bad))
    (folder / "fixed.py").write_text(MAIN.format(body=fixed))
    proc = ptlint("verify", "--root", str(tmp_path), "--output-format", "json", "--no-timing",
                  "--timeout", "120")
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["checks"][0]


def test_equal_results_pass(tmp_path):
    status, row = _verify_pair(tmp_path, "{'loss': 0.5}", "{'loss': 0.5}")
    assert (status, row["verdict"], row["passed"]) == (0, "passed", True)
    assert row["detail"] == "results equal (identical)"


def test_different_results_fail(tmp_path):
    status, row = _verify_pair(tmp_path, "{'loss': 0.5}", "{'loss': 0.75}")
    assert (status, row["verdict"], row["passed"]) == (1, "failed", False)
    assert row["detail"].startswith("results differ: loss: |diff| 0.25 (0.5 vs 0.75)")


@pytest.mark.parametrize("nothing", ["None", "{}"])
def test_nothing_returned_is_inconclusive(tmp_path, nothing):
    status, row = _verify_pair(tmp_path, nothing, nothing)
    assert (status, row["verdict"], row["passed"]) == (0, "inconclusive", False)
    assert row["detail"].startswith(f"nothing to compare: main() returned {nothing} in both")


def test_inconclusive_in_the_table(tmp_path):
    folder = tmp_path / "fixtures" / "PTL998_pair"
    folder.mkdir(parents=True)
    (tmp_path / "runtime_checks").mkdir()
    for name in ("bad.py", "fixed.py"):
        (folder / name).write_text(MAIN.format(body="None"))
    proc = ptlint("verify", "--root", str(tmp_path), "--no-timing", "--timeout", "120")
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    assert "PTL998 pair: inconclusive on cpu" in out
    assert "0 passed, 0 failed, 1 inconclusive" in out


def test_a_fix_that_changes_results_says_which_by_how_much_and_why(tmp_path):
    """PTL003's fix (zero_grad()) changes the weights on purpose: the report names
    each changed result, its largest change, and the rule's documented reason."""
    script = tmp_path / "train.py"
    shutil.copy(ROOT / "fixtures" / "PTL003_missing_zero_grad" / "bad.py", script)
    proc = ptlint("verify", str(script), "--output-format", "json", "--no-timing",
                  "--timeout", "120", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["checks"][0]
    assert row["verdict"] == "passed"
    detail = row["detail"]
    assert detail.startswith("results changed on purpose: "), detail
    assert "weight[0, " in detail and "by up to " in detail and "% of its largest value" in detail
    assert detail.endswith("Why, as documented: PTL003: without zero_grad() each step "
                           "applies the sum of all past gradients.")
