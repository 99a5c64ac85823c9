"""PTL021 bce-under-autocast: `binary_cross_entropy` on a sigmoid's output under
float16 autocast, fixed to `binary_cross_entropy_with_logits` on the logits.

The fixture's main() runs `step()` (nn.Linear(8, 1), seed 0, a batch of 16, sum
reduction) under float16 autocast and returns {"loss", "raised"}. On the CPU
autocast lets `binary_cross_entropy` run and both versions must give the same
loss. On CUDA the original raises ("unsafe to autocast": `raised` is 1, the loss
NaN), the documented difference; the fixed version must compute the loss, and it
must equal reference() below, the same loss in float32 without autocast, to
within float16's rounding.

Keep reference() in step with the fixture: same seed, model and data.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ptlint.verify.compare import compare_equal, difference

COMPARED = "the loss under float16 autocast (CUDA: the original raises), vs float32"
HALF = 1e-2  # float16 keeps about three significant digits


def reference(device="cpu"):
    torch.manual_seed(0)
    model = nn.Linear(8, 1).to(device)
    x = torch.randn(16, 8, device=device)
    y = torch.rand(16, 1, device=device)
    return {"loss": F.binary_cross_entropy_with_logits(model(x), y, reduction="sum").detach()}


def compare(bad, fixed, reference):
    exact = difference({"loss": fixed.result["loss"]}, reference.result, rtol=HALF, atol=0)
    against = (f"fixed = float32 loss ({exact.within()})" if exact.ok
               else f"fixed is not the float32 loss: {exact.describe()}")
    if bad.device == "cpu":
        passed, detail = compare_equal(bad, fixed)
        return bool(passed) and exact.ok, f"{detail}; {against}"
    raised = float(bad.result["raised"]) == 1.0 and float(fixed.result["raised"]) == 0.0
    return raised and exact.ok, (
        ("bad raises (unsafe to autocast), fixed computes the loss" if raised
         else f"expected only bad to raise: raised {float(bad.result['raised']):g} "
              f"in bad, {float(fixed.result['raised']):g} in fixed")
        + f"; {against}")
