"""PTL131 empty-cache-in-training-loop."""
from __future__ import annotations

import re

import libcst as cst

from ptlint.rule import Rule

_EMPTY_CACHE = re.compile(r"torch\.(?:[a-z_]+\.)*empty_cache")


class EmptyCacheInTrainingLoop(Rule):
    """
    ## What it does
    Flags `torch.cuda.empty_cache()` (or another backend's `empty_cache()`)
    and `gc.collect()` called on every step of a training loop: a loop that
    calls `.backward()` and an optimizer step.

    Only the hot loop counts (the loop that itself calls `.backward()` or the
    optimizer step, not the epoch loop around it), and calls under a
    schedule-like `if` in that loop (`if step % 100 == 0:`), a process guard
    (`if rank == 0:`), in an `except` handler (out-of-memory recovery) or in
    an `if` that leaves the loop (its body ends in `break`, `return`, `raise`
    or `sys.exit(...)`) are not flagged. A call of a helper defined in the same file that runs the
    backward pass or the step counts as one.

    ## Why is this bad?
    `empty_cache()` hands the memory PyTorch's caching allocator holds back
    to the driver. The next step needs the same memory again, so every step
    pays for fresh `cudaMalloc`/`cudaFree` calls, which also synchronise the
    device. It does not give your own process more memory: freed blocks were
    already reusable. `gc.collect()` walks every Python object on every step;
    tensors are freed by reference counting as soon as the last reference
    goes, so it only helps with reference cycles, which are better broken.
    Call these once, after training or between phases, if at all.

    ## Example
    ```python
    import torch

    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()
    ```

    Use instead:
    ```python
    import torch

    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.cuda.empty_cache()  # once, if another process needs the memory
    ```

    ## References
    - [CUDA semantics: memory management](https://pytorch.org/docs/stable/notes/cuda.html#memory-management)
    - [`torch.cuda.empty_cache`](https://pytorch.org/docs/stable/generated/torch.cuda.empty_cache.html)
    """

    code = "PTL131"
    message = "`torch.cuda.empty_cache()` on every training step slows every step down"
    tags = ("performance",)
    requires_text = ("empty_cache", "gc.collect", "collect(")

    semantic = True

    def __init__(self, context) -> None:
        super().__init__(context)
        self.calls = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.model.here.loop is not None:
            qualified = self.qualified_name(node.func) or ""
            if qualified == "gc.collect" or _EMPTY_CACHE.fullmatch(qualified):
                self.calls.append((self.model.site(node), qualified))

    def leave_Module(self, node: cst.Module) -> None:
        for site, qualified in self.calls:
            hot = site.ctx.hot_loop()
            if hot is not None and not site.periodic_within(hot):
                self.report(site.node, message=(
                    f"`{qualified}()` on every training step slows every step down"))
