"""PTL231 variable-wrapper: the fix keeps every tensor's meaning; the one
documented difference is `requires_grad` on a tensor Variable() wrapped."""
CHANGES = {"zeroed_requires_grad": "Variable(x) detaches x, x itself does not: in-place work on it is recorded"}
