"""PTL101 tensor-moved-after-creation: creating a tensor on its device gives the
same values without the detour through host memory.

main(device, repeats=20) creates tensors with deterministic factories
(arange, ones, eye, zeros with a dtype) and returns them; the values must be
equal. Random factories are left out: on an accelerator they draw from its
generator after the fix (which is why that fix is unsafe).
"""
from ptlint.verify.compare import compare_equal

COMPARED = "values of tensors from deterministic factories; time of both"
CHANGES_RESULTS = True  # random factories draw other numbers on an accelerator


def compare(bad, fixed):
    return compare_equal(bad, fixed, rtol=0, atol=0)


def note(device):
    if device == "cpu":
        return ("on CPU `.to('cpu')` returns the tensor itself: the moves copy nothing, so the "
                "ratio stays near 1 (measured honestly, with the machine's noise); only the "
                "move that also changes the dtype converts, and `dtype=` saves that. The fix "
                "pays off on an accelerator: no host allocation, no host-to-device copy")
    return "the ratio shows the host allocations and host-to-device copies the fix saves"
