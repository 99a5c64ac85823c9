"""PTL113 data-loader-without-workers."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument
from ptlint.rule import Rule
from ptlint.rules._tests import TracksTests

_DATA_LOADER = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")


class DataLoaderWithoutWorkers(TracksTests, Rule):
    """
    ## What it does
    Flags `torch.utils.data.DataLoader(...)` created without `num_workers`
    or with a literal `num_workers=0` (also when passed positionally).
    Loaders that receive `*args` or `**kwargs` (which may set it) and
    loaders whose `num_workers` is any other expression are not flagged.

    Test code (test files, `test*` functions, `Test*` classes) is not
    flagged. Off by default: small datasets held in memory, tensors already on the
    GPU and debugging sessions are fine without workers. Enable it with
    `--extend-select PTL113`.

    ## Why is this bad?
    With `num_workers=0`, every batch is loaded, decoded and augmented in the
    training process, between steps: the GPU waits for the data. Worker
    processes prepare the next batches while the current one trains. This is
    the "synchronized data loader" pattern of PyTorch's profiler.

    ## Example
    ```python
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    Use instead:
    ```python
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4,
                        persistent_workers=True)
    ```

    ## References
    - [Performance tuning guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "PTL113"
    message = "`DataLoader` without `num_workers`: batches are loaded in the training process"
    default_enabled = False
    tags = ("performance",)
    requires_text = ("DataLoader",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.in_test:
            return  # test code: speed does not matter there
        if isinstance(node.func, (cst.Call, cst.Subscript)):
            return
        if not self.is_name(node.func, *_DATA_LOADER) or any(a.star for a in node.args):
            return
        workers = argument(node, "num_workers", 5)
        if workers is None:
            self.report(node)
        elif isinstance(workers.value, cst.Integer) and workers.value.evaluated_value == 0:
            self.report(node, message="`DataLoader(num_workers=0)`: batches are loaded in the "
                                      "training process")
