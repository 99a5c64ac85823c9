"""PTL003 missing-zero-grad: without zero_grad() each step applies the sum of all
past gradients.

The fixture's main() returns {"weight": ...} after its first scenario: SGD
(lr 0.05) on `make_problem(device)` (seed 0, nn.Linear(4, 1), 6 batches of 8).
reference() below is the same training written out by hand: the fixed version
must equal its plain SGD, and the bad version its SGD on the running sum of all
gradients so far (the documented difference).

Keep reference() in step with the fixture: same seed, model, data and lr.
"""
import torch
import torch.nn as nn

from ptlint.verify.compare import difference

COMPARED = "weights after 6 steps vs a hand-written SGD loop"
CHANGES_RESULTS = True  # the fix corrects the training
APART = 1e-2  # bad must differ from correct by more than this share of the weights


def reference(device="cpu", lr=0.05):
    torch.manual_seed(0)  # make_problem(device, seed=0), written out
    model = nn.Linear(4, 1).to(device)
    data = [(torch.randn(8, 4, device=device), torch.randn(8, 1, device=device))
            for _ in range(6)]
    w0, b0 = (p.detach().clone() for p in model.parameters())
    w, b = w0.clone(), b0.clone()  # SGD on this step's gradient
    w_sum, b_sum = w0.clone(), b0.clone()  # SGD on the sum of all gradients so far
    gw_sum, gb_sum = torch.zeros_like(w0), torch.zeros_like(b0)
    for x, y in data:
        gw, gb = _grads(w, b, x, y)
        w, b = w - lr * gw, b - lr * gb
        gw2, gb2 = _grads(w_sum, b_sum, x, y)
        gw_sum, gb_sum = gw_sum + gw2, gb_sum + gb2
        w_sum, b_sum = w_sum - lr * gw_sum, b_sum - lr * gb_sum
    return {"weight": w, "accumulated": w_sum}


def _grads(w, b, x, y):
    """d/dw, d/db of mean((x w^T + b - y)^2), by hand."""
    error = x @ w.T + b - y
    scale = 2.0 / error.numel()
    return scale * error.T @ x, scale * error.sum(0)


def compare(bad, fixed, reference):
    correct = difference(fixed.result["weight"], reference.result["weight"])
    summed = difference(bad.result["weight"], reference.result["accumulated"])
    apart = difference(bad.result["weight"], fixed.result["weight"], rtol=APART, atol=0)
    passed = correct.ok and summed.ok and not apart.ok
    return passed, (
        (f"fixed = hand-written SGD ({correct.within()})" if correct.ok
         else f"fixed is not plain SGD: {correct.describe()}")
        + "; " + (f"bad = SGD on summed gradients ({summed.within()})" if summed.ok
                  else f"bad is not SGD on summed gradients: {summed.describe()}")
        + f"; bad is {apart.diff:.3g} away from correct"
        + ("" if not apart.ok else f", less than {APART:g} of the weights' largest value"))
