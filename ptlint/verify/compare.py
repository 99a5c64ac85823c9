"""Helpers for checks: formatting, walking and comparing results (torch is
imported lazily, inside the functions that need it).

Results are compared at a tolerance scaled to each result's own magnitude: a
tensor (or number) `a` and its counterpart `b` agree when

    max |a - b|  <=  rtol * max(|a|, |b|) + atol

with both maxima taken over the whole tensor. Kernels, thread counts and
processors round differently, by a few units in the last place of the largest
values a computation went through; this allows for that. An element-wise
relative test does not: values near zero (after a ReLU, or a subtraction that
cancels, as BatchNorm's) carry the rounding error of the large values they came
from. Integers, booleans and strings are compared exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptlint.verify.model import MemoryPoint, Version

# float32 rounds to about 1.2e-7 of a value; 1e-4 leaves room for the error a
# few hundred operations gather, and is far below what a real change moves (a
# training step, a bias, a skipped operation).
DEFAULT_RTOL, DEFAULT_ATOL = 1e-4, 1e-6


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} GiB"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale or unit == "us":
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of a nested dict/list/tuple, in a stable order."""
    if isinstance(tree, dict):
        out = []
        for key in sorted(tree, key=str):
            out += leaves(tree[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(tree, (list, tuple)):
        out = []
        for i, item in enumerate(tree):
            out += leaves(item, f"{prefix}[{i}]")
        return out
    return [(prefix, tree)]


@dataclass(frozen=True)
class Difference:
    """Where two results come closest to (or go furthest past) their tolerance."""

    result: str  # the result's path in what main() returned: "train_output", "params[1]"
    diff: float  # |a - b| at `index`; inf when the results cannot be compared
    tolerance: float  # rtol * the result's largest |value| + atol (0: compared exactly)
    scale: float = 0.0  # the result's largest |value|
    index: tuple[int, ...] = ()  # the element, in a tensor
    values: tuple[Any, Any] | None = None  # a and b there
    reason: str = ""  # why they cannot be compared (structure, shape, nan on one side)
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL

    @property
    def ok(self) -> bool:
        return self.diff <= self.tolerance

    @property
    def where(self) -> str:
        return self.result + (f"[{', '.join(map(str, self.index))}]" if self.index else "")

    def describe(self) -> str:
        """`train_output[1, 3, 0, 2]: |diff| 4.87 (5.21 vs 0.339); tolerance 0.00027
        = rtol 0.0001 x max |value| 2.7 + atol 1e-06`."""
        name = self.where or "the result"
        if self.reason:
            return f"{name}: {self.reason}"
        if self.tolerance == 0:
            allowed = "compared exactly"
        else:
            allowed = (f"tolerance {self.tolerance:.2g} = rtol {self.rtol:g} x max |value| "
                       f"{self.scale:.3g} + atol {self.atol:g}")
        values = f" ({_fmt(self.values[0])} vs {_fmt(self.values[1])})" if self.values else ""
        return f"{name}: |diff| {self.diff:.3g}{values}; {allowed}"


    def within(self) -> str:
        """For a passing comparison: `|diff| 3.8e-06 at x[0, 1], within its tolerance 0.00027`."""
        if self.diff == 0:
            return "identical"
        return f"|diff| {self.diff:.2g} at {self.where}, within its tolerance {self.tolerance:.2g}"


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def difference(a: Any, b: Any, rtol: float = DEFAULT_RTOL,
               atol: float = DEFAULT_ATOL) -> Difference:
    """Compare two results leaf by leaf (see the module's docstring) and return
    the leaf whose difference is largest relative to its tolerance."""
    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return Difference("", math.inf, 0.0, reason="their keys or lengths differ")
    worst: Difference | None = None
    for (path, x), (_, y) in zip(la, lb):
        d = _leaf_difference(path, x, y, rtol, atol)
        if worst is None or _excess(d) > _excess(worst):
            worst = d
    return worst or Difference("", 0.0, 0.0)


def _excess(d: Difference) -> float:
    if d.diff == 0:
        return 0.0
    return d.diff / d.tolerance if d.tolerance > 0 else math.inf


def _leaf_difference(path: str, x: Any, y: Any, rtol: float, atol: float) -> Difference:
    import torch

    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            return Difference(path, math.inf, 0.0, reason="a tensor on one side only")
        return _tensor_difference(path, x.detach().cpu(), y.detach().cpu(), rtol, atol)
    numbers = (int, float)
    if isinstance(x, numbers) and isinstance(y, numbers) and not isinstance(x, bool) and \
            not isinstance(y, bool) and (isinstance(x, float) or isinstance(y, float)):
        x, y = float(x), float(y)
        if x == y or (math.isnan(x) and math.isnan(y)):
            return Difference(path, 0.0, 0.0, values=(x, y))
        if not (math.isfinite(x) and math.isfinite(y)):
            return Difference(path, math.inf, 0.0, values=(x, y),
                              reason=f"{_fmt(x)} vs {_fmt(y)}")
        scale = max(abs(x), abs(y))
        return Difference(path, abs(x - y), rtol * scale + atol, scale, (), (x, y), "", rtol, atol)
    if x == y and type(x) is type(y):
        return Difference(path, 0.0, 0.0)
    return Difference(path, math.inf, 0.0, reason=f"{_fmt(x)} vs {_fmt(y)}")


def _tensor_difference(path: str, x: Any, y: Any, rtol: float, atol: float) -> Difference:
    import torch

    if x.shape != y.shape:
        return Difference(path, math.inf, 0.0,
                          reason=f"shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if x.numel() == 0:
        return Difference(path, 0.0, 0.0)
    exact = not (x.is_floating_point() or x.is_complex() or y.is_floating_point()
                 or y.is_complex())
    wide = torch.complex128 if x.is_complex() or y.is_complex() else torch.float64
    x, y = x.to(wide), y.to(wide)
    finite = torch.isfinite(x) & torch.isfinite(y)
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))  # inf == inf, nan ~ nan
    odd = ~(finite | same)
    if bool(odd.any()):
        index = _unravel(int(odd.reshape(-1).nonzero()[0]), x.shape)
        return Difference(path, math.inf, 0.0, index=index,
                          values=(_item(x, index), _item(y, index)),
                          reason=f"inf or nan on one side only at [{', '.join(map(str, index))}]"
                                 f" ({_fmt(_item(x, index))} vs {_fmt(_item(y, index))})")
    zero = torch.zeros((), dtype=torch.float64)
    gap = torch.where(finite, (x - y).abs(), zero)
    scale = max(float(torch.where(finite, x.abs(), zero).max()),
                float(torch.where(finite, y.abs(), zero).max()))
    flat_index = int(gap.reshape(-1).argmax())
    index = _unravel(flat_index, x.shape)
    diff = float(gap.reshape(-1)[flat_index])
    tolerance = 0.0 if exact else rtol * scale + atol
    return Difference(path, diff, tolerance, scale, index, (_item(x, index), _item(y, index)),
                      "", rtol, atol)


def _unravel(flat_index: int, shape: Any) -> tuple[int, ...]:
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(index))


def _item(t: Any, index: tuple[int, ...]) -> Any:
    return t[index].item() if index else t.item()


def changed_leaves(a: Any, b: Any, rtol: float = DEFAULT_RTOL,
                   atol: float = DEFAULT_ATOL) -> list[Difference]:
    """Every result of `a` that differs from its counterpart in `b` beyond its
    tolerance (one `Difference` each, at its largest gap)."""
    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return [Difference("", math.inf, 0.0, reason="their keys or lengths differ")]
    return [d for d in (_leaf_difference(p, x, y, rtol, atol) for (p, x), (_, y) in zip(la, lb))
            if not d.ok]


def by_how_much(d: Difference) -> str:
    """`weight: by up to 0.0412 (8.1% of its largest value 0.51)`."""
    if d.reason:
        return d.describe()
    share = f" ({d.diff / d.scale:.1%} of its largest value {d.scale:.3g})" if d.scale else ""
    return f"{d.where or 'the result'}: by up to {d.diff:.3g}{share}"


def allclose(a: Any, b: Any, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> bool:
    """Every result of `a` equals its counterpart in `b` within its tolerance."""
    return difference(a, b, rtol, atol).ok


def max_diff(a: Any, b: Any) -> tuple[float, str]:
    """The largest absolute difference between two results, and where it is.
    `inf` when their structure, shapes or non-numeric values differ."""
    worst, where = 0.0, ""
    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return math.inf, "their keys or lengths differ"
    for (path, x), (_, y) in zip(la, lb):
        d = _leaf_difference(path, x, y, 0.0, 0.0)
        if d.diff > worst:
            worst, where = d.diff, d.where
    return worst, where


def nothing_to_compare(result: Any) -> bool:
    """main() returned None, or only empty containers and Nones."""
    return all(leaf is None for _, leaf in leaves(result))


def compare_equal(bad: Version, fixed: Version, rtol: float = DEFAULT_RTOL,
                  atol: float = DEFAULT_ATOL) -> tuple[bool | None, str]:
    """The default check: the fix keeps what main() returns. None (inconclusive)
    when neither version returned anything to compare."""
    if nothing_to_compare(bad.result) and nothing_to_compare(fixed.result):
        return None, (f"nothing to compare: main() returned {_fmt(bad.result)} in both "
                      "versions (return a dict of results, e.g. the losses or the weights)")
    d = difference(bad.result, fixed.result, rtol, atol)
    if d.ok:
        return True, f"results equal ({d.within()})"
    return False, f"results differ: {d.describe()}"


def compare_changes(bad: Version, fixed: Version, changes: dict[str, str],
                    rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> tuple[bool, str]:
    """A fix that corrects a bug: the named results differ (the documented change),
    every other result is kept."""
    if not isinstance(bad.result, dict) or not isinstance(fixed.result, dict):
        return False, "main() must return a dict for a CHANGES check"
    if set(bad.result) != set(fixed.result):
        return False, "the two versions return different keys"
    missing = [k for k in changes if k not in bad.result]
    if missing:
        return False, f"main() returns no {', '.join(missing)}"
    same = [k for k in changes if allclose(bad.result[k], fixed.result[k], rtol, atol)]
    if same:
        return False, f"the documented change did not happen: {', '.join(same)} equal"
    kept = {k: v for k, v in bad.result.items() if k not in changes}
    d = difference(kept, {k: fixed.result[k] for k in kept}, rtol, atol)
    if not d.ok:
        return False, f"an unrelated result changed: {d.describe()}"
    detail = "; ".join(f"{k} differs: {why}" for k, why in changes.items())
    return True, detail + (f"; {', '.join(sorted(kept))} equal ({d.within()})" if kept else "")


def slope(pairs: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y against x over (x, y) pairs."""
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx else None


def growth_per_step(points: list[tuple[Any, MemoryPoint]], attr: str = "retained") -> float | None:
    """Least-squares slope of a memory measure against the swept value."""
    return slope([(float(v), float(getattr(p, attr))) for v, p in points
                  if getattr(p, attr) is not None])
