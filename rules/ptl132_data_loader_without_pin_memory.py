"""PTL132 data-loader-without-pin-memory."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword, with_keyword
from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule

_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_PIN_MEMORY_INDEX = 7  # DataLoader's 8th parameter


def _device_like(node: cst.BaseExpression) -> bool:
    """`"cuda"`, `"cuda:0"`, `device`, `self.device`, `args.device`, `torch.device(...)`."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.startswith("cuda")
    if isinstance(node, cst.Name):
        return "device" in node.value.lower()
    if isinstance(node, cst.Attribute):
        return "device" in node.attr.value.lower()
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value == "device"
    return False


class DataLoaderWithoutPinMemory(Rule):
    """
    ## What it does
    Flags `DataLoader(...)` calls that do not pass `pin_memory=` when the
    batches go to a CUDA device: a loop over the loader moves what it yields
    with `.cuda()`, `.to(device)` (a `"cuda..."` string, a name or attribute
    called `device`, or `device=`) or `.type(torch.cuda.FloatTensor)`, in a
    file that mentions CUDA. A loader that is returned or passed on (so the
    loop lives elsewhere) counts when some loop in the file moves its batches.
    Calls with `*args`/`**kwargs` (which may set it) and an explicit
    `pin_memory=False` are left alone.

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

    def __init__(self, context) -> None:
        super().__init__(context)
        self.loaders: list[tuple[cst.Call, tuple[int, str] | None]] = []
        self.assigned: dict[int, tuple[int, str]] = {}  # id(value) -> (scope, name) it is bound to
        self.loops: list[tuple[set[tuple[int, str]], set[str]]] = []  # (iterated, batch names)
        self.iterated: set[tuple[int, str]] = set()  # loaders some loop iterates over
        self.moved: set[tuple[int, str]] = set()  # loaders some loop moves the batches of
        self.scopes: list[tuple[int, set[str]]] = [(0, set())]  # function id, names bound in it
        self.cuda_types: set[str] = set()  # `Tensor = torch.cuda.FloatTensor if cuda else ...`
        self.mentions_cuda = "cuda" in context.source

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = node.params
        names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        self.scopes.append((id(node), names))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def _key(self, name: str, *, binding: bool = False) -> tuple[int, str]:
        """Which function's `name` this is: the current one's if bound there."""
        scope, names = self.scopes[-1]
        if binding:
            names.add(name.split(".", 1)[0])
        if name.split(".", 1)[0] in names:
            return scope, name
        return 0, name

    def visit_Assign(self, node: cst.Assign) -> None:
        name = dotted(node.targets[0].target) if len(node.targets) == 1 else None
        if name is not None:
            self.assigned[id(node.value)] = self._key(name, binding=True)
            if "torch.cuda." in cst.Module([]).code_for_node(node.value):
                self.cuda_types.add(name)
        if self.loops:  # `inputs, labels = batch`: still the batch
            batch = self.loops[-1][1]
            if _root(node.value) in batch:
                for target in node.targets:
                    batch.update(_names(target.target))

    def visit_For(self, node: cst.For) -> None:
        iterated = {self._key(name) for name in _iterated(node.iter)}
        self.iterated |= iterated
        self.loops.append((iterated, _names(node.target)))

    def leave_For(self, node: cst.For) -> None:
        self.loops.pop()

    def _moves_to_gpu(self, node: cst.Call) -> bool:
        func = node.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        if method == "cuda":
            return True
        if method == "to":
            return (bool(node.args) and _device_like(node.args[0].value)) \
                or keyword(node, "device") is not None
        if method == "type" and node.args:
            arg = node.args[0].value
            return dotted(arg) in self.cuda_types or ".cuda." in cst.Module([]).code_for_node(arg)
        return False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and self.loops and self._moves_to_gpu(node):
            root = _root(func.value)
            for iterated, batch in self.loops:
                if root in batch:
                    self.moved |= iterated
        if isinstance(func, (cst.Name, cst.Attribute)) and self.qualified_name(func) in _LOADERS:
            plain = [a for a in node.args if a.keyword is None and not a.star]
            if (keyword(node, "pin_memory") is None and not any(a.star for a in node.args)
                    and len(plain) <= _PIN_MEMORY_INDEX):
                self.loaders.append((node, self.assigned.get(id(node))))

    def leave_Module(self, node: cst.Module) -> None:
        if not (self.moved and self.mentions_cuda):
            return
        for loader, name in self.loaders:
            # a loader assigned to a name must be one whose batches move; one that is
            # returned or passed on (or iterated under another name) counts when any does
            if name is None or name not in self.iterated or name in self.moved:
                self.report(loader, replacement=with_keyword(loader, "pin_memory", "True"))


def _root(node: cst.BaseExpression) -> str | None:
    """`batch` for `batch`, `batch[0]`, `batch["x"].float()`, `batch.x`."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            break
    return node.value if isinstance(node, cst.Name) else None


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out: set[str] = set()
        for el in target.elements:
            out |= _names(el.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return {target.value} if isinstance(target, cst.Name) else set()


def _iterated(node: cst.BaseExpression) -> set[str]:
    """The loader(s) a `for` iterates: `loader`, `enumerate(loader)`, `tqdm(self.loader)`, `zip(a, b)`."""
    name = dotted(node)
    if name is not None:
        return {name}
    if isinstance(node, cst.Call):
        out: set[str] = set()
        for arg in node.args:
            if arg.keyword is None:
                out |= _iterated(arg.value)
        return out
    return set()
