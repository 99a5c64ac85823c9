"""PTL102 data-parallel: the DistributedDataParallel rewrite trains like one process.

bad.py trains with `nn.DataParallel` in one process on the whole batch. fixed.py
is the same program after the fix, launched with `torchrun --nproc_per_node=2`
on CPU with gloo: each process trains on half the batch and DDP averages the
gradients, so the parameters after N steps must equal the single-process ones.

main() returns {"params": [parameter tensors]}; under torchrun it initialises
the process group itself and takes its share of the batch by rank.
"""
from ptlint.verify.compare import difference

COMPARED = "parameters after 5 SGD steps: torchrun DDP (2 processes) vs 1 process, full batch"
NPROC = 2  # the fixed version runs under torchrun


def compare(bad, fixed):
    d = difference({"params": bad.result["params"]}, {"params": fixed.result["params"]})
    if d.ok:
        return True, f"parameters equal ({d.within()})"
    return False, f"parameters differ: {d.describe()}"


def note(device):
    return ("on CPU both versions are compute-bound on the same cores, so the ratio says "
            "little about GPUs: DistributedDataParallel's gain is one process per GPU, no "
            "per-step model replication and no GIL contention")
