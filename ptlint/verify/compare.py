"""Helpers for checks: formatting, flattening and comparing results (torch is
imported lazily, inside the functions that need it)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptlint.verify.model import MemoryPoint, Version

DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-6


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


def flat(tree: Any):
    """All tensors and numbers of a result, flattened into one float64 vector."""
    import torch

    parts = []
    for _, leaf in leaves(tree):
        if isinstance(leaf, torch.Tensor):
            parts.append(leaf.detach().reshape(-1).to(torch.float64))
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            parts.append(torch.tensor([float(leaf)], dtype=torch.float64))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def max_diff(a: Any, b: Any) -> tuple[float, str]:
    """The largest absolute difference between two results, and where it is.
    `inf` when their structure, shapes or non-numeric values differ."""
    import torch

    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return math.inf, "their keys or lengths differ"
    worst, where = 0.0, ""
    for (path, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                return math.inf, f"{path}: a tensor on one side only"
            if x.shape != y.shape:
                return math.inf, f"{path}: shapes {tuple(x.shape)} and {tuple(y.shape)}"
            if x.numel() == 0:
                continue
            x, y = x.detach().to(torch.float64), y.detach().to(torch.float64)
            finite = torch.isfinite(x) & torch.isfinite(y)
            same = (x == y) | (torch.isnan(x) & torch.isnan(y))  # inf == inf, nan ~ nan
            if not bool((finite | same).all()):
                return math.inf, f"{path}: inf or nan on one side only"
            d = (x[finite] - y[finite]).abs().max().item() if bool(finite.any()) else 0.0
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            d = 0.0 if float(x) == float(y) or (x != x and y != y) else abs(float(x) - float(y))
        else:
            d = 0.0 if x == y else math.inf
        if d != d:  # NaN
            d = math.inf
        if d > worst:
            worst, where = d, path
    return worst, where


def allclose(a: Any, b: Any, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> bool:
    import torch

    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return False
    for (_, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.allclose(
                x.detach().to(torch.float64), y.detach().to(torch.float64), rtol=rtol, atol=atol,
                equal_nan=True,
            ):
                return False
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            both_nan = math.isnan(float(x)) and math.isnan(float(y))
            if not both_nan and not math.isclose(float(x), float(y), rel_tol=rtol, abs_tol=atol):
                return False
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor) or x != y:
            return False
    return True


def compare_equal(bad: Version, fixed: Version, rtol: float = DEFAULT_RTOL,
                  atol: float = DEFAULT_ATOL) -> tuple[bool, str]:
    """The default check: the fix keeps what main() returns."""
    if allclose(bad.result, fixed.result, rtol, atol):
        worst, _ = max_diff(bad.result, fixed.result)
        return True, f"results equal (max |diff| {worst:.2g}, rtol {rtol:g}, atol {atol:g})"
    worst, where = max_diff(bad.result, fixed.result)
    return False, f"results differ: {where} (max |diff| {worst:.3g})"


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
    if not allclose(kept, {k: fixed.result[k] for k in kept}, rtol, atol):
        _, where = max_diff(kept, {k: fixed.result[k] for k in kept})
        return False, f"an unrelated result changed: {where}"
    detail = "; ".join(f"{k} differs: {why}" for k, why in changes.items())
    return True, detail + (f"; {', '.join(sorted(kept))} equal" if kept else "")


def growth_per_step(points: list[tuple[Any, MemoryPoint]], attr: str = "retained") -> float | None:
    """Least-squares slope of a memory measure against the swept value."""
    pairs = [(float(v), float(getattr(p, attr))) for v, p in points if getattr(p, attr) is not None]
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx else None
