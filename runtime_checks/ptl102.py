"""PTL102 data-parallel: the fixed script runs in both launch modes and reads the
original's checkpoints.

bad.py trains with `nn.DataParallel` in one process on the whole batch. fixed.py
is the same program after the fix, launched twice, after bad has finished and in
the same working directory:

- with plain `python`: no process group, so the fix keeps `DataParallel` and
  the run must be the original's, parameter for parameter;
- with `torchrun --nproc_per_node=2` (gloo on CPU): main() initialises a
  process group, so the fix wraps in `DistributedDataParallel`; each process
  trains on half the batch and DDP averages the gradients, so the parameters
  after N steps must equal the single-process ones.

main() resumes from `ptl102_checkpoint.pt` in its working directory when there
is one (loading it strictly: a state dict whose keys lost or gained the
`module.` prefix raises) and saves its initial state there otherwise. bad runs
first and saves it; both launches of fixed must find and load it. main()
returns {"params": [...], "resumed": bool, "keys": [state dict keys]}.
"""
from ptlint.verify.compare import difference

COMPARED = ("fixed loads bad's checkpoint; parameters after 5 SGD steps: plain python "
            "(DataParallel kept) and torchrun x2 (DDP) vs 1 process")
NPROC = (1, 2)  # the fixed version with plain `python`, and under torchrun
READS_BAD_FILES = True  # fixed starts after bad, in its working directory: the checkpoint


def compare(bad, fixed):
    mode = "plain python" if fixed.nproc == 1 else f"torchrun x{fixed.nproc}"
    if bad.result["resumed"]:
        return False, "bad found a checkpoint before it saved one: the folder was not fresh"
    if not fixed.result["resumed"]:
        return False, f"{mode}: the fixed version did not find the checkpoint bad saved"
    if fixed.result["keys"] != bad.result["keys"]:
        return False, (f"{mode}: state dict keys differ ({bad.result['keys'][:2]} before the "
                       f"fix, {fixed.result['keys'][:2]} after)")
    prefix = "`module.` kept" if all(k.startswith("module.") for k in bad.result["keys"]) \
        else "same keys"
    d = difference({"params": bad.result["params"]}, {"params": fixed.result["params"]})
    if d.ok:
        return True, (f"{mode}: loaded the original's checkpoint ({prefix}); parameters "
                      f"equal ({d.within()})")
    return False, f"{mode}: parameters differ: {d.describe()}"


def note(device):
    return ("on CPU both versions are compute-bound on the same cores, so the ratio says "
            "little about GPUs: DistributedDataParallel's gain is one process per GPU, no "
            "per-step model replication and no GIL contention")
