"""PTL005 backward-inside-autocast: moving backward() out of the autocast block
keeps the gradients.

main(device, steps=3) trains under CPU bfloat16 autocast (CUDA: float16 with a
GradScaler) and returns {"loss", "grads": [unscaled gradients of the last step],
"params"}. Gradients, loss and parameters must agree within the tolerance below
(backward ops run in the dtype autocast chose for their forward op, so they are
usually identical).
"""
from ptlint.verify.compare import allclose, max_diff

COMPARED = "gradients, loss and parameters under autocast (CPU bfloat16, CUDA float16 + GradScaler)"
RTOL, ATOL = 1e-2, 1e-3  # half-precision rounding


def compare(bad, fixed):
    worst, where = max_diff(bad.result, fixed.result)
    ok = allclose(bad.result, fixed.result, rtol=RTOL, atol=ATOL)
    return ok, (f"{'agree' if ok else 'differ'}: max |diff| {worst:.2g}"
                + (f" at {where}" if worst and not ok else "")
                + f" (rtol {RTOL:g}, atol {ATOL:g})")
