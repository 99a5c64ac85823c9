"""PTL031 parameter-data-write: autograd sees the in-place write."""
CHANGES = {
    "error": "fixed makes autograd report the in-place change of a saved tensor; bad silently computes",
    "grad": "bad's gradient is computed from overwritten values",
}
