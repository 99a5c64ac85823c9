"""PTL132 data-loader-without-pin-memory."""
from __future__ import annotations

import re

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.model import Safety
from ptlint.rules._loaders import Loader, LoaderRule

_PIN_MEMORY_INDEX = 7  # DataLoader's 8th parameter
_GPU = re.compile(r"cuda|torch\.accelerator")  # (not accelerate's `accelerator` object)


class DataLoaderWithoutPinMemory(LoaderRule):
    """
    ## What it does
    Flags `DataLoader(...)` calls that do not pass `pin_memory=` when the
    batches go to a CUDA device: a loop over the loader moves what it yields
    with `.cuda()`, `.to(device)` (a `"cuda..."` string, a name or attribute
    called `device`, or `device=`) or `.type(torch.cuda.FloatTensor)`, also
    item by item (`tuple(t.to(device) for t in batch)`,
    `{k: v.cuda() for k, v in batch.items()}`) or batch by batch
    (`next(batches).to(device)` after `batches = iter(loader)`), in a file whose code (not only its comments) mentions CUDA or
    `torch.accelerator`. A loader that is returned, stored or passed to
    a function (so the loop may live elsewhere) counts when some loop in the
    file moves its batches. A loader iterated in place
    (`for x in DataLoader(...)`) is judged by that loop alone, and a name
    bound to a second `DataLoader(...)` names a new loader from there on.

    Left alone: calls with `*args`/`**kwargs` (which may set it), an explicit
    `pin_memory=False`, a loader only inspected (`next(iter(loader))`,
    `len(loader)`, a loop that breaks after its first batch or a few:
    `if i == 1: break` over `enumerate(loader)`, last or first in the body,
    or `if i == n_samples - 1: break` in a loop that neither backpropagates
    nor steps, or such a loop that waits for the user between batches:
    `cv2.waitKey()`, `plt.show()`, `input()`) or never used, a loader over indices or values already in
    memory (`DataLoader(range(n), ...)`, a list display, or a variable bound
    to one), a dataset made on a device (`Cls(root, device=device)`, a
    `TensorDataset` of a tensor moved there, also inside `ConcatDataset([...])`
    or `Subset(d, indices)`, unpacked from such a call or an attribute of its
    result: `tasks.dataset`; pinning refuses CUDA tensors), the whole dataset in one batch
    (`batch_size=len(dataset)`) and test code (test files, and `test*`
    functions and `Test*` classes in a file that uses pytest or unittest).

    This rule is off by default: whether pinning pays off depends on the
    batch size, the number of workers and the host's memory.

    ## Why is this bad?
    Copies to the GPU from ordinary (pageable) host memory go through an
    extra staging copy and cannot overlap with computation. With
    `pin_memory=True` the loader puts batches in page-locked memory (in a
    background thread when workers are used), so the host-to-device copy is
    faster and `tensor.to("cuda", non_blocking=True)` can run asynchronously.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
    ```

    Use instead:
    ```python
    import torch
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## Fix safety
    Unsafe. The batches hold the same values, but pinned memory is
    page-locked host memory, a limited resource: very large batches or many
    prefetched batches can exhaust it. A dataset whose tensors already live
    on the GPU cannot be pinned and makes the loader raise, and pinning
    initialises CUDA in the main process.

    ## References
    - [Performance Tuning Guide: use pinned memory](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    - [DataLoader: memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "PTL132"
    message = "`DataLoader` without `pin_memory=True` while batches go to the GPU"
    fix_title = "Add `pin_memory=True`"
    fix_safety = Safety.UNSAFE
    default_enabled = False
    tags = ("performance",)
    requires_text = ("DataLoader",)

    def check(self, loader: Loader) -> None:
        node = loader.call
        plain = [a for a in node.args if a.keyword is None and not a.star]
        if (keyword(node, "pin_memory") is not None or any(a.star for a in node.args)
                or len(plain) > _PIN_MEMORY_INDEX or loader.in_test or self.skipped(loader)
                or not self.context.mentions(_GPU)):
            return
        used = self.how_used(loader)
        if "moved" in used or ("passed" in used and self.any_moved):
            self.report(node, replacement=with_keyword(node, "pin_memory", "True"))
