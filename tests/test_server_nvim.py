"""`ptlint server` from a real editor: Neovim, headless, runs tests/nvim/ptlint_lsp.lua
(diagnostics, hover, a suppression and a fix applied through its own LSP client).
Runs where `nvim` is installed (`apt-get install neovim`); the pytest-lsp suite
is the server's full test."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "nvim" / "ptlint_lsp.lua"
NVIM = shutil.which("nvim")

TRAIN = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
model = torch.nn.DataParallel(model)
losses = []
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    losses.append(loss)
"""


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed")
def test_neovim_shows_diagnostics_and_applies_actions(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, PTLINT_FILE="train.py", XDG_CACHE_HOME=str(tmp_path / "cache"),
               PTLINT_CMD=f"{sys.executable} -m ptlint server")
    proc = subprocess.run([NVIM, "--headless", "-u", "NONE", "-c", f"luafile {SCRIPT}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    head, _, rest = out.partition("diagnostics after the suppression:")
    assert "  4:9 ptlint PTL102 `DataParallel` is slower" in head
    assert "  8:5 ptlint PTL001 `loss` is kept across loop iterations" in head
    assert "hover: **PTL102** `data-parallel`" in head
    assert "    4  model = torch.nn.DataParallel(model)  # noqa: PTL102" in head
    assert "PTL102" not in rest.split("diagnostics after undo:")[0]
    fixed = rest.split("diagnostics after the fix:")
    assert "from torch.nn.parallel import DistributedDataParallel" in fixed[0]
    assert "  9:5 ptlint PTL001" in fixed[1] and "PTL102" not in fixed[1]
    assert (tmp_path / "train.py").read_text() == TRAIN  # edits are the buffer's, unsaved
