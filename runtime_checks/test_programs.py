"""`ptlint verify train.py -- ARGS`: a user's script run as the program it is,
the original against a copy with ptlint's fixes, in copies of its folder."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_runtime import HERE, ptlint  # noqa: E402

QUICK = ("--output-format", "json", "--rounds", "1", "--timeout", "120")
DIGITS = HERE / "programs" / "train_digits.py"
MiB = 1024 * 1024

# a PTL001 mistake (the running total keeps its graph), and what the script prints
KEEPS = """\
import argparse
import sys

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
model = nn.Linear(8, 1)
total = 0
for step in range(args.steps):
    total += nn.functional.mse_loss(model(torch.randn(4, 8)), torch.zeros(4, 1))
{tail}
"""


def _verify(tmp_path: Path, tail: str, *args: str) -> tuple[int, dict]:
    script = tmp_path / "train.py"
    script.write_text(KEEPS.format(tail=tail))
    proc = ptlint("verify", str(script), *QUICK, *args, cwd=tmp_path)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["checks"][0]


def test_the_digits_program_shows_the_memory_its_validation_keeps():
    """The realistic program: one short epoch with its own arguments. The
    original's validation keeps every batch's activations (PTL001), the fixed one
    does not: its peak is far lower and its memory stays flat over the logged
    batches; the output (losses, accuracy) is the same."""
    proc = ptlint("verify", str(DIGITS), *QUICK, "--", "--epochs", "1", "--train-samples", "256",
                  "--val-samples", "1024", "--log-interval", "2")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["checks"][0]
    assert (row["rule"], row["verdict"]) == ("PTL001", "passed"), row["detail"]
    assert row["detail"].startswith("output equal: ")
    bad, fixed = row["bad"]["run"], row["fixed"]["run"]
    assert bad["status"] == fixed["status"] == 0
    # 1024 validation images keep about 16 KiB of activations each in the original
    assert bad["peak_host"] - fixed["peak_host"] > 8 * MiB
    # logged: training batches 0 and 2, then validation batches 0, 2, ..., 14 (counted on)
    assert bad["step_unit"] == "batch"
    assert [s for s, _ in bad["steps"]] == [s for s, _ in fixed["steps"]] == [0, 2, 3, 5, 7, 9,
                                                                             11, 13, 15, 17]
    memory = [text for label, text in row["facts"] if label == "memory"]
    assert memory[0].startswith("bad: peak ") and " per batch over 10 logged batches" in memory[0]
    from ptlint.verify.outputs import growth

    # the fixed run's slope is the allocator's noise: a few hundred KiB per batch on
    # some machines, against MiB per batch for the original
    assert growth(bad["steps"]) > 4 * max(abs(growth(fixed["steps"])), 64 * 1024)


def test_the_script_is_run_as_is_and_left_untouched(tmp_path):
    (tmp_path / "data.txt").write_text("7\n")
    tail = ('print("steps", args.steps, "data", open("data.txt").read().strip())\n'
            'print("total", round(total.item(), 4))')
    status, row = _verify(tmp_path, tail, "--", "--steps", "5")
    assert status == 0 and row["verdict"] == "passed", row["detail"]
    assert "steps 5 data 7" in row["bad"]["run"]["stdout"]
    assert row["detail"] == "output equal: 3 printed values on 2 lines agree"
    assert row["compared"] == "what `train.py --steps 5` prints, before and after ptlint's fixes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt", "train.py"]  # nothing written here
    assert (tmp_path / "train.py").read_text() == KEEPS.format(tail=tail)


def test_output_that_a_safe_looking_fix_changes_fails(tmp_path):
    """PTL001's fix is documented to keep results: output it changes fails."""
    status, row = _verify(tmp_path, 'print("keeps graph", int(total.requires_grad))')
    assert (status, row["verdict"]) == (1, "failed")
    assert row["detail"] == "output differs: 1 of 1 lines with numbers differ, by up to 1 (100.0%)"
    assert ["differs", "bad:   keeps graph 1"] in row["facts"]
    assert ["", "fixed: keeps graph 0"] in row["facts"]


def test_a_script_that_prints_nothing_is_inconclusive(tmp_path):
    status, row = _verify(tmp_path, "")
    assert (status, row["verdict"]) == (0, "inconclusive")
    assert row["detail"].startswith("nothing to compare: the script printed no numbers")


def test_a_script_that_needs_missing_data_says_so(tmp_path):
    """(in fresh interpreters: the path CUDA runs take)"""
    status, row = _verify(tmp_path, 'open("/nonexistent/mnist/train.csv")', "--no-fork")
    assert (status, row["verdict"]) == (0, "inconclusive")
    assert "It cannot find '/nonexistent/mnist/train.csv'" in row["detail"]
    assert "through the script's own arguments" in row["detail"]


def test_a_script_that_needs_the_network_says_so(tmp_path):
    tail = 'import urllib.request\nurllib.request.urlopen("http://127.0.0.1:9/mnist.gz", timeout=5)'
    status, row = _verify(tmp_path, tail)
    assert (status, row["verdict"]) == (0, "inconclusive")
    assert "URLError" in row["detail"] and "It needs the network" in row["detail"]


def test_a_script_that_runs_too_long_is_stopped(tmp_path):
    status, row = _verify(tmp_path, "import time\ntime.sleep(600)", "--timeout", "5")
    assert row["verdict"] == "inconclusive"
    assert "timed out after 5 s (--timeout)" in row["detail"]
    assert row["bad"]["run"]["status"] is None


def test_interleaved_rounds_give_a_ratio_with_its_interval(tmp_path):
    status, row = _verify(tmp_path, 'print("total", round(total.item(), 4))', "--rounds", "2")
    assert status == 0 and row["verdict"] == "passed"
    speed = row["speed"]
    assert speed["rounds"] == 2 and speed["low"] <= speed["ratio"] <= speed["high"]
    assert len(row["bad"]["time"]["samples"]) == len(row["fixed"]["time"]["samples"]) == 2
    times = [text for label, text in row["facts"] if label == "time"]
    assert times and "95% CI" in times[0] and "over 2 interleaved rounds" in times[0]


# -- GPU -------------------------------------------------------------------------------------
CUDA_SCRIPT = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda")
criterion = nn.CrossEntropyLoss()
for step in range(4):
    x, y = torch.randn(256, 512, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
val_loss = 0
for step in range(16):
    x, y = torch.randn(256, 512, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        val_loss += criterion(model(x), y)
    print(f"step {step} loss {val_loss.item() / (step + 1):.3f}")
"""


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_program_on_cuda_is_measured_by_the_allocator(tmp_path):
    """float16 autocast with GradScaler, then a validation loop that keeps its graph:
    the peaks and per-step memory come from torch's CUDA allocator, and each run's
    time ends with a CUDA synchronisation."""
    script = tmp_path / "train.py"
    script.write_text(CUDA_SCRIPT)
    proc = ptlint("verify", str(script), "--device", "cuda", "--output-format", "json",
                  "--rounds", "2", "--timeout", "300", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["checks"][0]
    assert (row["rule"], row["verdict"], row["device"]) == ("PTL001", "passed", "cuda")
    bad, fixed = row["bad"]["run"], row["fixed"]["run"]
    assert bad["peak_cuda"] > fixed["peak_cuda"] > 0
    assert bad["step_unit"] == "step" and len(bad["steps"]) == 16
    from ptlint.verify.outputs import growth

    assert growth(bad["steps"]) > 10 * max(abs(growth(fixed["steps"])), 1024)
    assert row["speed"]["rounds"] == 2
