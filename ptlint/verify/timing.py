"""Timing you can trust: bad and fixed timed in interleaved rounds (bad, fixed,
then fixed, bad, ...), so that the machine's drift touches both alike, and their
ratio given with a 95% confidence interval.

Each round yields one time per version; the interval is Student's t on the
rounds' log ratios log(bad / fixed), turned back into a ratio. "Faster" or
"slower" is claimed only when the interval excludes 1.
"""
from __future__ import annotations

import math
import statistics

from ptlint.verify.model import Speed

# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if df <= len(_T975) else 1.96


def speed(bad: list[float], fixed: list[float]) -> Speed | None:
    """bad / fixed from paired rounds (bad[i] and fixed[i] ran one after the other);
    None with fewer than two rounds."""
    logs = [math.log(b / f) for b, f in zip(bad, fixed) if b > 0 and f > 0]
    if len(logs) < 2:
        return None
    mean = statistics.fmean(logs)
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Speed(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def describe(s: Speed) -> str:
    """`fixed is 1.92x faster (95% CI 1.71x to 2.15x over 5 interleaved rounds)`."""
    interval = f"95% CI {s.low:.2f}x to {s.high:.2f}x over {s.rounds} interleaved rounds"
    if s.claim == "faster":
        return f"fixed is {s.ratio:.2f}x faster ({interval})"
    if s.claim == "slower":
        return f"fixed is {1 / s.ratio:.2f}x slower: bad / fixed {s.ratio:.2f}x ({interval})"
    return f"no measurable difference (bad / fixed {s.ratio:.2f}x, {interval})"
