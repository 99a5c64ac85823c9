"""PTL003 missing-zero-grad: without zero_grad() each step applies the sum of all
past gradients.

main(device, steps=5) returns {"params": [parameters after the steps]}.
reference() below is the same training written out by hand: the fixed version
must equal its plain SGD, and the bad version its SGD on the running sum of all
gradients so far (the documented difference).

Keep reference() in step with the fixture: same seed, model, data and lr.
"""
import torch
import torch.nn as nn

from ptlint.verify import max_diff

COMPARED = "parameters after 5 steps vs a hand-written SGD loop"
CHANGES_RESULTS = True  # the fix corrects the training
ATOL = 1e-5


def reference(device="cpu", steps=5, lr=0.05):
    torch.manual_seed(0)
    model = nn.Linear(4, 1).to(device)  # the fixture's initial parameters
    inputs, targets = torch.randn(steps, 16, 4), torch.randn(steps, 16, 1)
    w0, b0 = (p.detach().clone() for p in model.parameters())
    w, b = w0.clone(), b0.clone()  # SGD on this step's gradient
    w_sum, b_sum = w0.clone(), b0.clone()  # SGD on the sum of all gradients so far
    gw_sum, gb_sum = torch.zeros_like(w0), torch.zeros_like(b0)
    for x, y in zip(inputs.to(device), targets.to(device)):
        gw, gb = _grads(w, b, x, y)
        w, b = w - lr * gw, b - lr * gb
        gw2, gb2 = _grads(w_sum, b_sum, x, y)
        gw_sum, gb_sum = gw_sum + gw2, gb_sum + gb2
        w_sum, b_sum = w_sum - lr * gw_sum, b_sum - lr * gb_sum
    return {"params": [w, b], "accumulated": [w_sum, b_sum]}


def _grads(w, b, x, y):
    """d/dw, d/db of mean((x w^T + b - y)^2), by hand."""
    error = x @ w.T + b - y
    scale = 2.0 / error.numel()
    return scale * error.T @ x, scale * error.sum(0)


def compare(bad, fixed, reference):
    correct, _ = max_diff(fixed.result["params"], reference.result["params"])
    summed, _ = max_diff(bad.result["params"], reference.result["accumulated"])
    apart, _ = max_diff(bad.result["params"], fixed.result["params"])
    passed = correct <= ATOL and summed <= ATOL and apart > 100 * ATOL
    return passed, (f"fixed = hand-written SGD (max |diff| {correct:.2g}); bad = SGD on summed "
                    f"gradients (max |diff| {summed:.2g}), {apart:.3g} away from correct "
                    f"(tolerance {ATOL:g})")
