"""PTL010 require-grad-typo: the assignment finally takes effect."""
CHANGES = {
    "bias_requires_grad": "bad's `require_grad = False` set a new attribute; fixed freezes the bias",
    "bias_grad_is_none": "so the frozen bias gets no gradient",
}
