"""PTL330 random-state-copied-to-workers."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from packaging.version import Version

from ptlint.fixers.arguments import keyword
from ptlint.rule import Rule

_DATASETS = ("torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset")
_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_GENERATORS = ("numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
               "random.Random", "torch.Generator", "torch._C.Generator")
_NUMPY_NOT_DRAWS = frozenset({"default_rng", "RandomState", "Generator", "seed", "get_state",
                              "set_state", "SeedSequence", "PCG64", "MT19937", "Philox",
                              "SFC64", "BitGenerator"})
_WORKER_INFO = ("torch.utils.data.get_worker_info", "torch.utils.data._utils.worker.get_worker_info")
_ENTRY = ("__getitem__", "__getitems__")
_NUMPY_SEEDED_FROM = Version("1.9")


def _self_attr(node: cst.BaseExpression) -> str | None:
    """`x` for `self.x`, `self.x.y`, ...; None otherwise."""
    last = None
    while isinstance(node, cst.Attribute):
        last = node
        node = node.value
    if isinstance(node, cst.Name) and node.value == "self" and last is not None:
        return last.attr.value
    return None


@dataclass
class _Class:
    node: cst.ClassDef
    gens: set[str] = field(default_factory=set)
    draws: list[tuple[str, cst.CSTNode, str]] = field(default_factory=list)
    numpy_draws: list[tuple[str, cst.CSTNode]] = field(default_factory=list)
    calls: dict[str, set[str]] = field(default_factory=dict)
    assigned_in: dict[str, set[str]] = field(default_factory=dict)
    worker_aware: bool = False


class RandomStateCopiedToWorkers(Rule):
    """
    ## What it does
    Flags random numbers drawn in a `torch.utils.data.Dataset`'s
    `__getitem__` (or a method it calls) from a random state that every
    DataLoader worker receives as an identical copy:

    - a generator object stored on the dataset: `self.rng =
      np.random.default_rng(...)` / `np.random.RandomState(...)` /
      `random.Random(...)` / `torch.Generator()`, drawn from as
      `self.rng.random()` or `generator=self.g`;
    - the global NumPy random state (`np.random.rand(...)`), only when the
      target PyTorch version is below 1.9.

    It is silent when the file creates DataLoaders and all of them use
    `num_workers=0` (or leave it out) or pass a `worker_init_fn` (or
    `**kwargs`), when the generator is (re)created inside `__getitem__`, and
    when the class calls `get_worker_info()`. When the file creates no
    DataLoader the dataset is assumed to be used with workers.

    ## Why is this bad?
    Each DataLoader worker process gets a copy of the dataset, generator
    state included. PyTorch reseeds its own RNG, Python's `random` module
    and (since 1.9) NumPy's global RNG differently in every worker, but it
    cannot know about generator objects you keep: every worker draws exactly
    the same sequence, so "random" crops, flips or noise repeat across the
    workers' batches. The copy in the main process never advances either, so
    unless `persistent_workers=True` the workers start from the same state
    again every epoch and the augmentations repeat epoch after epoch.
    Before PyTorch 1.9 this also held for the global NumPy state.

    ## Example
    ```python
    import numpy as np
    from torch.utils.data import Dataset

    class Noisy(Dataset):
        def __init__(self, data):
            self.data = data
            self.rng = np.random.default_rng(0)

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            return self.data[i] + self.rng.normal()
    ```

    Use instead:
    ```python
    import numpy as np
    import torch
    from torch.utils.data import Dataset

    class Noisy(Dataset):
        def __init__(self, data):
            self.data = data
            self.rng = None

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            if self.rng is None:  # created in the worker, from the worker's seed
                self.rng = np.random.default_rng(torch.initial_seed())
            return self.data[i] + self.rng.normal()
    ```
    or draw with `torch.rand(...)`/`torch.randn(...)`, which PyTorch seeds
    per worker and per epoch, or reseed the generator in a `worker_init_fn`.

    ## References
    - [DataLoader: randomness in multi-process data loading](https://pytorch.org/docs/stable/data.html#randomness-in-multi-process-data-loading)
    - [Reproducibility: DataLoader](https://pytorch.org/docs/stable/notes/randomness.html#dataloader)
    """

    code = "PTL330"
    message = "Random state copied into every DataLoader worker: each worker draws the same numbers"
    tags = ("reproducibility",)
    requires_text = ("Dataset",)

    def __init__(self, context) -> None:
        super().__init__(context)
        self.dataset_classes: set[str] = set()
        self.finished: dict[str, _Class] = {}
        self.classes: list[_Class | None] = []
        self.method: list[str | None] = [None]
        self.found: list[tuple[cst.CSTNode, str]] = []
        self.loaders = 0
        self.unsafe_loaders = 0
        version = context.torch_version
        self.numpy_unseeded = version is not None and version < _NUMPY_SEEDED_FROM

    # -- classes and methods -------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        is_dataset = any(
            self.qualified_name(b.value) in _DATASETS
            or (isinstance(b.value, cst.Name) and b.value.value in self.dataset_classes)
            for b in node.bases
        )
        cls = None
        if is_dataset:
            self.dataset_classes.add(node.name.value)
            cls = _Class(node)
            for base in node.bases:  # what a local base class stored on `self`
                parent = self.finished.get(getattr(base.value, "value", None))
                if parent is not None:
                    cls.gens |= parent.gens
                    for attr, methods in parent.assigned_in.items():
                        cls.assigned_in.setdefault(attr, set()).update(methods)
        self.classes.append(cls)
        self.method.append(None)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.method.pop()
        cls = self.classes.pop()
        if cls is None:
            return
        self.finished[node.name.value] = cls
        if cls.worker_aware:
            return
        reachable = set(_ENTRY)
        work = list(_ENTRY)
        while work:
            for callee in cls.calls.get(work.pop(), ()):
                if callee not in reachable:
                    reachable.add(callee)
                    work.append(callee)
        for method, draw, attr in cls.draws:
            if method in reachable and attr in cls.gens and not (cls.assigned_in.get(attr, set()) & reachable):
                self.found.append((draw, (
                    f"`self.{attr}` is copied into every DataLoader worker: each worker draws "
                    "the same random numbers, and the same again every epoch")))
        if self.numpy_unseeded:
            for method, draw in cls.numpy_draws:
                if method in reachable:
                    self.found.append((draw, (
                        "`np.random` in a Dataset: before PyTorch 1.9 every DataLoader worker "
                        "starts from the same NumPy random state")))

    def _current(self) -> tuple[_Class, str] | tuple[None, None]:
        cls = self.classes[-1] if self.classes else None
        method = self.method[-1]
        if cls is None or method is None:
            return None, None
        return cls, method

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # a method of the innermost class; nested functions belong to their method
        inside_class = self.classes and self.method[-1] is None
        self.method.append(node.name.value if inside_class else self.method[-1])

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.method.pop()

    # -- what the methods do ---------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        cls, method = self._current()
        if cls is None:
            return
        value = node.value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                and value.func.attr.value == "manual_seed":
            value = value.func.value  # `torch.Generator().manual_seed(0)`
        is_generator = isinstance(value, cst.Call) and self.qualified_name(value.func) in _GENERATORS
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                attr = t.attr.value
                cls.assigned_in.setdefault(attr, set()).add(method)
                if is_generator:
                    cls.gens.add(attr)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func) if isinstance(node.func, (cst.Name, cst.Attribute)) else None
        if qualified in _LOADERS:
            self._loader(node)
            return
        cls, method = self._current()
        if cls is None:
            return
        if qualified in _WORKER_INFO:
            cls.worker_aware = True
            return
        func = node.func
        if isinstance(func, cst.Attribute):
            if isinstance(func.value, cst.Name) and func.value.value == "self":
                cls.calls.setdefault(method, set()).add(func.attr.value)
            else:
                attr = _self_attr(func.value)
                if attr is not None:
                    cls.draws.append((method, node, attr))
        generator = keyword(node, "generator")
        if generator is not None:
            attr = _self_attr(generator.value)
            if attr is not None:
                cls.draws.append((method, node, attr))
        if qualified is not None and qualified.startswith("numpy.random.") \
                and qualified.rsplit(".", 1)[1] not in _NUMPY_NOT_DRAWS:
            cls.numpy_draws.append((method, node))

    def _loader(self, node: cst.Call) -> None:
        self.loaders += 1
        plain = [a for a in node.args if a.keyword is None and not a.star]
        if any(a.star for a in node.args) or keyword(node, "worker_init_fn") is not None \
                or len(plain) > 10:  # `worker_init_fn` is the 11th parameter
            return
        workers = keyword(node, "num_workers")
        if workers is None:
            workers = plain[5] if len(plain) > 5 else None  # `num_workers` is the 6th
        if workers is None or (isinstance(workers.value, cst.Integer) and workers.value.value == "0"):
            return
        self.unsafe_loaders += 1

    def leave_Module(self, node: cst.Module) -> None:
        if self.loaders and not self.unsafe_loaders:
            return
        for draw, message in self.found:
            self.report(draw, message=message)
