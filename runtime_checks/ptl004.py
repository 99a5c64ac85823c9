"""PTL004 zero-grad-before-step: zero_grad() between backward() and step() makes
every step a no-op.

main(device, steps=10) returns {"initial": [parameters before training],
"params": [parameters after], "losses": tensor of the loss at each step}.
The bad version's parameters must not have changed at all; the fixed version's
loss must go down.
"""
from ptlint.verify import allclose, max_diff

COMPARED = "parameter change and loss over 10 steps"
CHANGES_RESULTS = True  # the fix makes training happen


def compare(bad, fixed):
    b, f = bad.result, fixed.result
    frozen = allclose(b["params"], b["initial"], rtol=0, atol=0)
    moved, _ = max_diff(f["params"], f["initial"])
    first, last = float(f["losses"][0]), float(f["losses"][-1])
    learns = last < first and moved > 0
    return frozen and learns, (
        ("bad parameters unchanged" if frozen else "bad parameters changed")
        + f" (loss stays {float(b['losses'][-1]):.4g}); fixed loss {first:.4g} -> {last:.4g}"
        + f", parameters moved by up to {moved:.3g}")
