"""PTL004 zero-grad-before-step: zero_grad() between backward() and step() makes
every step a no-op.

The fixture's main() returns how far the weights moved in each scenario
(`amp_change`, `plain_change`, `model_change`) and the summed losses of two
passes of the AMP accumulation loop (`amp_loss_first`, `amp_loss_last`).
The bad version's weights must not move at all; the fixed version's must, and
its loss must go down.
"""
CHANGES_RESULTS = True  # the fix makes training happen
COMPARED = "weight change in 3 training loops, and the loss"
MOVED = ("amp_change", "plain_change", "model_change")


def compare(bad, fixed):
    b, f = bad.result, fixed.result
    frozen = all(float(b[k]) == 0.0 for k in MOVED)
    moved = all(float(f[k]) > 0.0 for k in MOVED)
    first, last = float(f["amp_loss_first"]), float(f["amp_loss_last"])
    learns = last < first
    return frozen and moved and learns, (
        ("bad weights unchanged in every loop" if frozen else "bad weights changed")
        + "; fixed weights moved by " + ", ".join(f"{float(f[k]):.3g}" for k in MOVED)
        + f" and its loss went {first:.4g} -> {last:.4g}")
