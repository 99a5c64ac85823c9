"""PTL101 tensor-moved-after-creation: creating a tensor on its device gives the
same values without the detour through host memory.

main(device) creates tensors with factories, with casts, views and fills
between the factory and the move (folded into the factory by the fix:
`torch.zeros(4).long()` -> `torch.zeros(4, dtype=torch.long)`,
`torch.zeros(2, 3).fill_(2)` -> `torch.full((2, 3), 2.0)`), and returns them
with their dtypes. On the CPU every value must be equal, bit for bit. On an
accelerator the values of the fixes that are safe must be equal bit for bit;
those whose fix is unsafe (random draws, which come from the device's
generator after the fix, and values computed in the device's arithmetic:
`linspace`, `logspace`, windows) are left out there.
"""
from ptlint.verify.compare import compare_equal
from ptlint.verify.model import Version

COMPARED = "values and dtypes of the created tensors; time of both"
CHANGES_RESULTS = True  # random factories draw other numbers on an accelerator
# results whose fix is unsafe on an accelerator (see the rule's Fix safety)
DEVICE_DEPENDENT = ("rand", "randn", "randint", "randperm", "uniform", "randn_half",
                    "linspace", "logspace", "window")


def _without(version: Version, keys) -> Version:
    result = {k: v for k, v in version.result.items() if k not in keys}
    return Version(version.label, version.path, version.device, result=result)


def compare(bad, fixed):
    if bad.device == "cpu":
        return compare_equal(bad, fixed, rtol=0, atol=0)
    passed, detail = compare_equal(_without(bad, DEVICE_DEPENDENT),
                                   _without(fixed, DEVICE_DEPENDENT), rtol=0, atol=0)
    return passed, f"{detail}; unsafe fixes ({', '.join(DEVICE_DEPENDENT)}) not compared"


def note(device):
    if device == "cpu":
        return ("on CPU `.to('cpu')` returns the tensor itself: the moves copy nothing, so the "
                "ratio stays near 1 (measured honestly, with the machine's noise); only the "
                "move that also changes the dtype converts, and `dtype=` saves that. The fix "
                "pays off on an accelerator: no host allocation, no host-to-device copy")
    return "the ratio shows the host allocations and host-to-device copies the fix saves"
