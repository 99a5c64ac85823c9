"""`ptlint server` from a real editor: Emacs in batch mode runs
tests/emacs/ptlint_eglot.el (the README's eglot set-up: diagnostics through
flymake, the code actions of a finding, its fix applied). Runs where Emacs and
eglot are installed (`apt-get install emacs-nox`, plus `elpa-eglot` for Emacs
28); the pytest-lsp suite is the server's full test."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "emacs" / "ptlint_eglot.el"
EMACS = shutil.which("emacs")

TRAIN = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
losses = []
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    losses.append(loss)
m = torch.nn.DataParallel(model)
"""


def has_eglot() -> bool:
    if EMACS is None:
        return False
    probe = subprocess.run([EMACS, "--batch", "--eval",
                            "(progn (package-initialize) (require 'eglot))"],
                           capture_output=True, timeout=120)
    return probe.returncode == 0


@pytest.mark.skipif(not has_eglot(), reason="Emacs with eglot is not installed")
def test_emacs_eglot_shows_diagnostics_and_applies_the_fix(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, PTLINT_FILE="train.py", XDG_CACHE_HOME=str(tmp_path / "cache"),
               HOME=str(tmp_path), PTLINT_CMD=f"{sys.executable} -m ptlint server")
    proc = subprocess.run([EMACS, "--batch", "-l", str(SCRIPT)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr  # Emacs's `message` writes to stderr in batch mode
    assert proc.returncode == 0, out
    assert "train.py:7:4: eglot-warning ptlint [PTL001]: `loss` is kept across loop" in out
    assert "train.py:8:4: eglot-warning ptlint [PTL102]: `DataParallel`" in out
    assert "action: PTL001: Store the value with `.detach()` (unsafe fix)\n" in out
    assert "action: Suppress PTL001 on this line" in out
    assert "line 7 now:     losses.append(loss.detach())" in out
    assert "diagnostics after the fix: 1 (before: 2)" in out
    assert (tmp_path / "train.py").read_text() == TRAIN  # edits are the buffer's, unsaved
