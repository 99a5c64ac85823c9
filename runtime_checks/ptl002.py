"""PTL002 tensor-alias-mutated: an alias follows the live tensor; a copy does not.

main(device) returns three matching trees of tensors:
  "initial":  true copies taken before anything changed (the ground truth),
  "snapshot": what the aliased name (or the restored state dict) holds at the end,
  "live":     the tensors that were changed in place.
The bad version's snapshot must equal the live tensors and have left the
initial values; the fixed version's snapshot must still hold the initial values
exactly (a copy does no arithmetic); and the live tensors (the training itself)
must be the same in both.
"""
from ptlint.verify.compare import allclose, difference, max_diff

COMPARED = "the snapshot vs the live, changed tensors"
CHANGES_RESULTS = True  # the fix corrects what the snapshot holds


def compare(bad, fixed):
    b, f = bad.result, fixed.result
    followed = allclose(b["snapshot"], b["live"]) and not allclose(b["snapshot"], b["initial"])
    intact = difference(f["snapshot"], f["initial"], rtol=0, atol=0)
    training = difference(b["live"], f["live"])
    moved, _ = max_diff(b["initial"], b["live"])
    parts = [
        "bad snapshot follows the live tensors" if followed
        else "bad snapshot does NOT follow the live tensors",
        f"fixed snapshot keeps the initial values (live ones moved by up to {moved:.3g})"
        if intact.ok else f"fixed snapshot was changed: {intact.describe()}",
        f"live tensors equal in both ({training.within()})" if training.ok
        else f"live tensors differ: {training.describe()}",
    ]
    return followed and intact.ok and training.ok, "; ".join(parts)
