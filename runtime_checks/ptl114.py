"""PTL114 zero-grad-set-to-none-false: gradients are freed instead of zeroed."""
CHANGES = {
    "opt_grad_is_none": "after optimizer.zero_grad() the gradients are None, not zero tensors",
    "model_grad_is_none": "likewise after model.zero_grad()",
}
