"""No run may lose a byte, break working code, or answer for the wrong file (issue 13).

Each case goes through the command line as a user runs it; the hooks that
inject a concurrent edit or count operations come from tests/robust_plugin,
a sitecustomize put on PYTHONPATH for those subprocesses only.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_robustness import _env, ptlint

CUDA = "torch.zeros(2).cuda()"


# -- scale: --fix and noqa grow linearly with the findings of a file (item 20) ---------
def _counted(tmp_path: Path, name: str, text: str, *args: str) -> tuple[str, dict[str, int]]:
    path = tmp_path / name
    path.write_text(text)
    counts = tmp_path / f"{name}.counts.json"
    proc = ptlint(str(path), "-j", "1", "--select", "PTL101", "--output-format", "concise", *args,
                  env=_env(PTLINT_TEST_COUNT=str(counts)))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout + proc.stderr, json.loads(counts.read_text())


LAYOUTS = {
    "one fix per line": lambda n: "import torch\n" + "".join(f"x{i} = {CUDA}\n" for i in range(n)),
    "all on one line": lambda n: "import torch\nx = [" + ", ".join([CUDA] * n) + "]\n",
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fix_and_noqa_work_grows_linearly_with_the_findings(tmp_path, layout):
    """Four times the findings cost about four times the work (n log n at most),
    not sixteen: edits were checked against every edit taken before them, and
    the noqa filter read a finding's whole line once per finding."""
    work: dict[int, dict[str, int]] = {}
    for n in (300, 1200):
        text = LAYOUTS[layout](n)
        out, check = _counted(tmp_path, f"check{n}.py", text)
        assert f"Found {n} findings." in out
        out, fix = _counted(tmp_path, f"fix{n}.py", text, "--fix")
        assert f"Fixed {n} findings, 0 remaining." in out
        assert (tmp_path / f"fix{n}.py").read_text().count('device="cuda"') == n
        work[n] = {key: check[key] + fix[key] for key in check}
    for key in work[300]:
        assert work[1200][key] <= 6 * max(work[300][key], 1), (key, work)
