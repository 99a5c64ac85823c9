"""The ratio of interleaved rounds and its confidence interval: "faster" or
"slower" only when the interval excludes 1 (`ptlint.verify.timing`)."""
from __future__ import annotations

import math

import pytest

from ptlint.verify import model, report, timing


def test_a_clear_speed_up_is_claimed():
    s = timing.speed([2.0, 2.1, 1.9, 2.05], [1.0, 1.0, 1.0, 1.0])
    assert s.claim == "faster" and s.rounds == 4
    assert s.low < s.ratio < s.high and s.low > 1
    assert math.isclose(s.ratio, math.exp(sum(map(math.log, [2.0, 2.1, 1.9, 2.05])) / 4))
    assert timing.describe(s).startswith(f"fixed is {s.ratio:.2f}x faster (95% CI ")


def test_a_clear_slow_down_is_claimed():
    s = timing.speed([1.0, 1.0, 1.0], [2.0, 2.2, 2.1])
    assert s.claim == "slower" and s.high < 1
    assert timing.describe(s).startswith(f"fixed is {1 / s.ratio:.2f}x slower")


def test_noise_around_1_is_no_measurable_difference():
    s = timing.speed([1.0, 1.3, 0.8, 1.1, 0.9], [1.1, 0.9, 1.0, 1.2, 0.85])
    assert s.low < 1 < s.high
    assert s.claim == "no measurable difference"
    assert timing.describe(s).startswith("no measurable difference (bad / fixed ")
    assert timing.describe(s).endswith("over 5 interleaved rounds)")


def test_the_interval_is_students_t_on_the_log_ratios():
    logs = [math.log(1.5), math.log(1.2)]  # two rounds: t(0.975, 1 df) = 12.706
    s = timing.speed([1.5, 1.2], [1.0, 1.0])
    half = 12.706 * abs(logs[0] - logs[1]) / math.sqrt(2) / math.sqrt(2)
    mean = sum(logs) / 2
    assert math.isclose(s.low, math.exp(mean - half)) and math.isclose(s.high, math.exp(mean + half))


@pytest.mark.parametrize("bad, fixed", [([1.0], [1.0]), ([], []), ([0.0, 1.0], [1.0, 0.0])])
def test_fewer_than_two_rounds_give_no_ratio(bad, fixed):
    assert timing.speed(bad, fixed) is None


def test_the_table_marks_a_ratio_without_measurable_difference():
    row = model.Row(None, "cpu", "passed", "", model.Version("bad", "b", "cpu"),  # type: ignore
                    model.Version("fixed", "f", "cpu"),
                    speed=model.Speed(1.05, 0.9, 1.2, 5))
    assert report.ratio_cell(row) == "1.05x~"
    row.speed = model.Speed(2.0, 1.8, 2.2, 5)
    assert report.ratio_cell(row) == "2.00x"
    row.comparable_time = False
    assert report.ratio_cell(row) == "-"
