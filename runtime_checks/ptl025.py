"""PTL025 context-manager-not-called: `with torch.no_grad:` raises; the fix runs."""

COMPARED = "bad raises at the `with`; fixed runs without building a graph"


def compare(bad, fixed):
    raised = sorted(k for k in bad.result if k.endswith("_raised"))
    names = [k.removesuffix("_raised") for k in raised]
    if not raised or not all(bad.result[k] for k in raised):
        return False, "the bad version did not raise"
    if any(name not in fixed.result for name in names):
        return False, "the fixed version does not return every result"
    if any(fixed.result.get(f"{name}_requires_grad") for name in names):
        return False, "the fixed version still builds a graph"
    return True, f"bad raised in {', '.join(names)}; fixed ran them with no graph"
