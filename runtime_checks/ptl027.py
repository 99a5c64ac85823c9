"""PTL027 clip-grad-before-backward: moved after the backward, the clip bounds
every update.

The fixture's main() trains two small problems whose gradients are far above
the clipping norm (1.0, with SGD at lr 0.01) and returns the norm of every
update (`updates`, `logged_updates`) and the norms the clip returned (`norms`).
The bad version's updates are not bounded by lr * max_norm (its clip saw the
gradients zero_grad() had cleared: `norms` are all 0); the fixed version's
are, and its clip reports the true norms.
"""
CHANGES_RESULTS = True  # the fix makes the clipping happen
COMPARED = "the size of every update, and the norms the clip saw"
BOUND = 0.01 * 1.0  # lr * max_norm of the fixture


def compare(bad, fixed):
    b, f = bad.result, fixed.result
    bound = BOUND * (1 + 1e-3)  # an update is p - lr * g rounded at |p|: far below 0.1%
    bad_largest = max(float(b["updates"].max()), float(b["logged_updates"].max()))
    fixed_largest = max(float(f["updates"].max()), float(f["logged_updates"].max()))
    unclipped = bad_largest > 10 * bound and float(b["norms"].abs().max()) == 0.0
    clipped = fixed_largest <= bound and float(f["norms"].min()) > 1.0
    return unclipped and clipped, (
        f"bad's largest update {bad_largest:.3g} (its clip saw norm 0); fixed's {fixed_largest:.3g}"
        f" <= lr * max_norm = {BOUND:.3g}, the clip saw norms from {float(f['norms'].min()):.3g}")


def note(device):
    return ("fixed may take longer: its clip computes the norm of real gradients, where bad's "
            "found none (zero_grad() had set them to None). That is the cost of the clipping "
            "the code asked for, never paid before.")
