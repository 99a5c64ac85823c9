"""bench/bench.py prints its tables in the README's layout."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "bench" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench"]


@pytest.mark.parametrize("torchfix", [True, False])
def test_every_row_has_a_cell_for_each_column(bench, torchfix):
    def series(name: str, wall: float):
        return bench.Series(name, [bench.Sample(wall, wall * 2, 100.0)])

    result = bench.Compared("diffusers", 1_000, series("ptlint cold", 2.0),
                            series("ptlint warm", 0.1), series("parse floor", 1.6),
                            series("TorchFix", 40.0) if torchfix else bench.Series("TorchFix"),
                            series("ptlint's parse", 1.4))
    head, rule, *rows = result.table()
    assert head.startswith("| diffusers | wall s |")
    assert ("TorchFix / this" in head) == torchfix
    assert [r.split(" | ")[0] for r in rows] == [
        "| ptlint cold", "| ptlint warm", "| parse floor", "| ptlint's parse",
        *(["| TorchFix"] if torchfix else [])]
    assert {line.count("|") for line in [head, rule, *rows]} == {head.count("|")}
    cold = rows[0].strip("| ").split(" | ")
    assert cold[-1] == "1.25"  # this / floor: 2.0 / 1.6
    if torchfix:
        assert cold[-2] == "20.0x"
