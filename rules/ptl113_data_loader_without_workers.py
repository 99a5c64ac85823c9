"""PTL113 data-loader-without-workers."""
from __future__ import annotations

import re

import libcst as cst

from ptlint.fixers.arguments import argument, keyword
from ptlint.rules._loaders import Loader, LoaderRule

# a tensor put on a device: `.cuda(...)`, `device=` other than the CPU, `.to(..device..)`
_ON_DEVICE = re.compile(r"\.cuda\(|\bdevice\s*=\s*(?![\"']cpu)|\.to\([^)]*\b(?:device|cuda|gpu)")


def _unbatched(call: cst.Call) -> bool:
    """`DataLoader(stream, batch_size=None)`: the dataset yields whole batches itself
    (an iterable dataset or a data pipe, sharded by rank); workers would each
    replay the stream unless it shards by worker too."""
    size = argument(call, "batch_size", 1)
    return size is not None and isinstance(size.value, cst.Name) and size.value.value == "None"


class DataLoaderWithoutWorkers(LoaderRule):
    """
    ## What it does
    Flags `torch.utils.data.DataLoader(...)` created without `num_workers`
    or with a literal `num_workers=0` (also when passed positionally), when
    the loader is iterated (also batch by batch with `next(batches)` in a
    loop, after `batches = iter(loader)`) or passed on (returned, stored,
    given to a function). Loaders that receive `*args` or `**kwargs` (which may set it)
    and loaders whose `num_workers` is any other expression are not flagged.

    Not flagged either, because there is nothing for workers to overlap:

    - a loader that is only inspected (`next(iter(loader))`, `len(loader)`,
      `print(loader)`, a loop that breaks after its first batch, or after a
      few: `for i, b in enumerate(loader): ...; if i == 1: break`, the same
      test first in the body (`if i >= 3: break`), or
      `if i == n_samples - 1: break` in a loop that neither backpropagates
      nor steps, or such a loop that waits for the user between batches:
      `cv2.waitKey()`, `plt.show()`, `input()`) or never used;
    - a loader over indices or values already in memory
      (`DataLoader(range(n), ...)`, `DataLoader(torch.arange(n), ...)`,
      `torch.randperm(n)`, a list or tuple display, also through a variable
      bound to one of these) or over a `TensorDataset` (torch's, or a
      project's own class of that name; given in place, through a variable
      bound to one or to what a function of the file returns when its every
      `return` gives one, or through a parameter of a function every call of
      which in the file passes one, or what such a function returns; also a
      part of one, `Subset(d, indices)` or `random_split(d, sizes)`, or a
      `ConcatDataset` of such): indexing tensors in memory costs less than
      passing the batch from a worker process;
    - a dataset made on a device (`Cls(root, device=device)`, also inside
      `ConcatDataset([...])` or `Subset(d, indices)`, through a variable
      bound to one, also unpacked (`train, test = tasksets(device=device)`),
      or an attribute of one (`train.dataset`)): its tensors already live on
      the GPU, which worker processes cannot use;
    - the whole dataset in one batch (`batch_size=len(dataset)`,
      `x.shape[0]`, `x.size(0)`);
    - `batch_size=None`: the dataset yields whole batches itself (an
      iterable dataset or a data pipe), and worker processes would each
      replay it unless it also shards its stream by worker;
    - a loader over an instance of a dataset class of the file that is a
      `TensorDataset` written by hand (also made through `partial(Cls, ...)`,
      or a `Subset` or `random_split` part of one):
      its `__getitem__` only indexes attributes and converts or views them
      (`self.x[i].float()`, `self.x.size(0)`, torch or NumPy computation),
      and its other methods build nothing that reads on indexing (a dataset, an HDF5 or
      memory-mapped file, the result of a function of unknown origin);
    - a loader whose `collate_fn` (a lambda or a function of the file, or a
      function of the file that it calls), or whose dataset class's
      `__getitem__` (or a method of the class it calls), builds the batch on
      a device (`.cuda()`, `device=`, `.to(device)`): CUDA cannot be used in
      forked worker processes, so that loader must load in the main process;
    - test code (test files, and `test*` functions and `Test*` classes in a
      file that uses pytest or unittest).

    Off by default: small datasets held in memory, tensors already on the
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
    for images, labels in loader:
        ...
    ```

    Use instead:
    ```python
    from torch.utils.data import DataLoader
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4,
                        persistent_workers=True)
    for images, labels in loader:
        ...
    ```

    ## References
    - [Performance tuning guide: asynchronous data loading](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "PTL113"
    message = "`DataLoader` without `num_workers`: batches are loaded in the training process"
    default_enabled = False
    tags = ("performance",)
    requires_text = ("DataLoader",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.definitions: dict[str, list[cst.FunctionDef]] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.definitions.setdefault(node.name.value, []).append(node)

    def _on_device(self, call: cst.Call, loader: Loader) -> bool:
        """The batch is built on a device, which worker processes could not do: by a
        `collate_fn` (a lambda or a function of the file, or one it calls) or by
        the `__getitem__` of the dataset's class (or a method of it that it calls)."""
        collate = keyword(call, "collate_fn")
        value = collate.value if collate is not None else None
        functions: list[cst.CSTNode] = [value] if isinstance(value, cst.Lambda) else \
            self.definitions.get(value.value, []) if isinstance(value, cst.Name) else []
        code = "".join(cst.Module([]).code_for_node(f) for f in functions)
        called = {m.group(1) for m in re.finditer(r"\b(\w+)\(", code)} & self.definitions.keys()
        code += "".join(cst.Module([]).code_for_node(f) for name in called
                        for f in self.definitions[name])
        getitem = self.methods(loader.dataset_class, "__getitem__")
        code += "".join(cst.Module([]).code_for_node(f) for f in getitem)
        for name in {m.group(1) for m in re.finditer(r"\bself\.(\w+)\(", code)}:
            code += "".join(cst.Module([]).code_for_node(f)
                            for f in self.methods(loader.dataset_class, name))
        return bool(_ON_DEVICE.search(code))

    def check(self, loader: Loader) -> None:
        node = loader.call
        if (loader.in_test or loader.tensor_dataset or any(a.star for a in node.args)
                or self.skipped(loader) or _unbatched(node) or self._on_device(node, loader)):
            return
        workers = argument(node, "num_workers", 5)
        if workers is None:
            self.report(node)
        elif isinstance(workers.value, cst.Integer) and workers.value.evaluated_value == 0:
            self.report(node, message="`DataLoader(num_workers=0)`: batches are loaded in the "
                                      "training process")
