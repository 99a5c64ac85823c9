"""PTL102 data-parallel."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import without_keywords
from ptlint.model import Safety
from ptlint.rule import Rule

_DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                  "torch.nn.parallel.data_parallel.DataParallel")


class DataParallel(Rule):
    """
    ## What it does
    Flags `torch.nn.DataParallel(...)`, through any import alias.

    ## Why is this bad?
    `DataParallel` runs a single process: it copies the whole model to every
    GPU on every forward pass, gathers all outputs on the first GPU and is
    bound by the GIL. It is slower than `DistributedDataParallel` even on one
    machine, and PyTorch recommends `DistributedDataParallel` instead.

    ## Example
    ```python
    import torch.nn as nn
    model = nn.DataParallel(model)
    ```

    Use instead:
    ```python
    import torch
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(model) if torch.distributed.is_initialized() else model
    ```
    and launch the script with `torchrun --nproc_per_node=<gpus> script.py`,
    calling `torch.distributed.init_process_group()` at start-up and placing
    each process's model on `cuda:<LOCAL_RANK>`.

    ## Fix safety
    Unsafe. The rewrite wraps the model in `DistributedDataParallel` when a
    process group is initialised and leaves it unwrapped otherwise, so a
    script started with plain `python` runs on one device instead of all of
    them until it is launched with `torchrun` and initialises the process
    group. `device_ids` and `output_device` are dropped: each process drives
    one device. Calls with further positional arguments, or whose module
    argument is not a plain name (it would be evaluated twice), are reported
    without a fix.

    ## References
    - [DataParallel vs DistributedDataParallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    - [CUDA semantics: use DistributedDataParallel instead of DataParallel](https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead)
    """

    code = "PTL102"
    message = "`DataParallel` is slower than `DistributedDataParallel`, even on one machine"
    fix_title = "Wrap in `DistributedDataParallel` when a process group is initialised"
    fix_safety = Safety.UNSAFE
    tags = ("performance",)
    requires_text = ("DataParallel",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.assigned: set[int] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigned.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, (cst.Call, cst.Subscript)):
            return
        qualified = self.qualified_name(node.func)
        if qualified not in _DATA_PARALLEL:
            return
        module = node.args[0] if node.args else None
        plain = [a for a in node.args if a.keyword is None and not a.star]
        fixable = (
            module is not None
            and module.keyword is None and not module.star
            and len(plain) == 1
            and not any(a.star for a in node.args)
            and isinstance(module.value, (cst.Name, cst.Attribute))
            and _is_reference(module.value)
        )
        if not fixable:
            self.report(node)
            return
        rest = without_keywords(node, "device_ids", "output_device")
        ddp = rest.with_changes(func=cst.Name("DistributedDataParallel"))
        test = cst.parse_expression("torch.distributed.is_initialized()")
        replacement = cst.IfExp(test=test, body=ddp, orelse=module.value)
        if id(node) not in self.assigned:  # inside a larger expression: keep it one operand
            replacement = replacement.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        self.report(node, replacement=replacement,
                    imports=("import torch", "from torch.nn.parallel import DistributedDataParallel"))


def _is_reference(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)
