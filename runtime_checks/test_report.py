"""`ptlint verify`'s table reads in the terminal it is printed in: 80 columns
as well as 200, nothing cut, no line wider than the terminal."""
from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from ptlint.verify import model, report

MiB = 1024 * 1024


def _version(label: str, median: float | None, peak: int | None, nproc: int = 1,
             error: str | None = None, iqr: float = 0.0) -> model.Version:
    timing = model.Timing(median, iqr, 10) if median is not None else None
    memory = [model.MemoryPoint({}, peak, 0, 0)] if peak is not None else []
    return model.Version(label, f"/somewhere/{label}.py", "cpu", nproc, {}, memory, timing,
                         error)


def _row(code: str, name: str, passed: bool, detail: str, bad: model.Version,
         fixed: model.Version, compared: str, note: str | None = None) -> model.Row:
    spec = model.Spec(code, types.SimpleNamespace(COMPARED=compared))
    check = model.Check(code, name, f"fixtures/{code}_{name}", Path("bad.py"), Path("fixed.py"),
                        spec)
    return model.Row(check, "cpu", "passed" if passed else "failed", detail, bad, fixed, None,
                     f"{code}: {note}" if note else None)


ROWS = [
    _row("PTL001", "loss-kept-with-graph", True,
         "bad's peak grows 512.0 KiB/step, linearly (4.5 MiB -> 8.6 MiB -> 16.8 MiB at 8 -> 16 "
         "-> 32 steps); fixed 1.2 KiB/step (flat); losses equal (identical)",
         _version("bad", 0.123456, 999 * MiB), _version("fixed", 0.0987, 123 * MiB),
         "peak memory over N steps (N = 8, 16, 32); recorded losses"),
    _row("PTL102", "data-parallel", True, "parameters equal (|diff| 3e-08 at params[0][1, 3], "
         "within its tolerance 0.00012)",
         _version("bad", 0.0117, 2 * MiB), _version("fixed", 0.0145, 196 * 1024, nproc=2),
         "parameters after 5 SGD steps: torchrun DDP (2 processes) vs 1 process, full batch",
         note="on CPU both versions are compute-bound on the same cores, so the ratio says "
              "little about GPUs; the fixed version was launched with "
              "`torchrun --nproc_per_node=2`; its time and memory are rank 0's"),
    _row("PTL122", "conv-bias-before-batchnorm", False,
         "an unrelated result changed: train_output[1, 3, 0, 2]: |diff| 4.87 (5.21 vs 0.339); "
         "tolerance 0.00027 = rtol 0.0001 x max |value| 2.7 + atol 1e-06",
         _version("bad", 0.00175, 2 * MiB, iqr=0.001), _version("fixed", 0.00161, 2 * MiB),
         "fix changes parameters; the rest is equal"),
    _row("PTL999", "crashes", False, "fixed failed: RuntimeError: boom",
         _version("bad", 0.0001, 1024), _version("fixed", None, None, error="RuntimeError: boom"),
         "results of main() are equal"),
]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("columns", [80, 200])
def test_the_table_fits_the_terminal(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    report.render_table(ROWS, "ptlint verify: torch 2.13.0+cpu, cpu, seed 0, 1 thread per "
                              "process")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns, out
    [header] = [line for line in lines if line.startswith("rule ")]
    assert header.split() == ["rule", "check", "bad", "time", "fixed", "time", "ratio", "bad",
                              "peak", "fixed", "peak"]
    cells = {line.split()[0]: line.split() for line in lines if re.match(r"PTL\d{3}  ", line)}
    assert cells["PTL001"] == ["PTL001", "passed", "123", "ms", "98.7", "ms", "1.25x",
                               "999.0", "MiB", "123.0", "MiB"]
    assert cells["PTL122"][-5:] == ["1.09x?", "2.0", "MiB", "2.0", "MiB"]
    assert cells["PTL999"][2:] == ["100", "us", "error", "-", "1.0", "KiB", "error"]
    # the fixed version of PTL102 ran under torchrun with 2 processes: its row says so
    assert [line.split()[:5] for line in lines if re.match(r"PTL102 .* ms ", line)] == \
        [["PTL102", "x2", "passed", "11.7", "ms"]]
    text = _words(out)
    for row in ROWS:  # every word of every block is there, in order
        status = "passed" if row.passed else "FAILED"
        launch = " (torchrun x2)" if row.check.code == "PTL102" else ""
        assert f"{row.check.code} {row.check.name}{launch}: {status} on cpu" in text
        assert f"compared {_words(row.check.spec.compared)}" in text
        assert f"found {_words(row.detail)}" in text
    assert _words(ROWS[1].note.removeprefix("PTL102: ")) in text
    assert "2 passed, 2 failed." in text and "?: noisy timing" in text
    assert "RuntimeError: boom" in text


def test_a_narrow_terminal_wraps_the_blocks_not_the_table(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    report.render_table(ROWS[:1], "header")
    lines = capsys.readouterr().out.splitlines()
    found = lines.index(next(line for line in lines if line.startswith("  found")))
    assert lines[found + 1].startswith(" " * report.LABEL) and lines[found + 1].strip()
